"""One inference request on the wire (InferJob, behind ExecutableNetwork.infer and
InferRequest in client.py): loads the network on the current daemon if needed
(ExecutableNetwork._ensure_loaded), sends the inputs through a shared-memory slot
(shm_client.py) or as array frames, on the link's thread-safe Client (async) or
the calling thread's own socket (sync: Link.fast_call), and retries what can be
retried: a slot the daemon dropped (frames then), a handle the daemon does not
know (restarted at the same endpoint: load again, once).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from core.microkernel import RemoteError

from .daemon import DaemonError
from .errors import remote_error
from .shm_client import ShmSlot, discard, give_back, lend_outputs, take_slot, write_inputs
from .shm_protocol import align
from .transport import SPIN_S

if TYPE_CHECKING:
    from .client import ExecutableNetwork


class InferJob:
    """One inference request: sent through the link's thread-safe Client (async) or
    on the calling thread's own socket (sync, see transport.FastChannel)."""

    def __init__(self, exec_net: "ExecutableNetwork", inputs: dict, timeout: float | None,
                 sync: bool = False):
        self.exec_net = exec_net
        self.inputs = inputs
        self.timeout = exec_net._link.core.timeout if timeout is None else timeout
        self.deadline = time.monotonic() + self.timeout
        self.sync = sync
        self.retried = False
        self.use_shm = True
        self.slot: ShmSlot | None = None
        self.pending = None
        self._outputs: dict | None = None
        self.perf: list | None = None  # per-layer rows when the network counts them
        self._error: BaseException | None = None
        if not sync:
            self._send()

    def _args(self) -> tuple[str, dict]:
        """(verb, args) of the request; takes a shared-memory slot when it can."""
        exec_net = self.exec_net
        link = exec_net._link
        conn, handle = exec_net._ensure_loaded(self.deadline)
        self.conn, self.handle = conn, handle
        verb = "infer"
        extra = {"perf": True} if exec_net.perf_count else {}
        if self.use_shm and conn.shm_ok is not False:
            need = sum(align(a.nbytes) for a in self.inputs.values()) + exec_net._out_bytes
            slot = take_slot(link, conn, need)
            if slot is not None:
                shm = write_inputs(slot, self.inputs)
                self.slot = slot
                return verb, {"handle": handle, "shm": shm, **extra}
        return verb, {"handle": handle, "inputs": self.inputs, **extra}

    def _send(self) -> None:
        verb, args = self._args()
        try:
            self.pending = self.exec_net._link.send(self.conn, verb, args)
        except BaseException:
            self._drop_slot(False)
            raise

    def _exchange(self) -> dict:
        """One attempt: the reply's result (raises RemoteError, DaemonDied, ...)."""
        exec_net = self.exec_net
        link = exec_net._link
        if self.sync:
            verb, args = self._args()
            if exec_net._fast and self.conn.fast_endpoint:
                try:
                    return link.fast_call(self.conn, verb, args, self.deadline, "infer",
                                          endpoint=self.conn.fast_endpoint, spin=SPIN_S)
                except RemoteError as exc:
                    if exc.kind != "not_fast":
                        raise
                    exec_net._fast = False  # the daemon says no: the main endpoint then
            return link.fast_call(self.conn, verb, args, self.deadline, "infer")
        if self.pending is None:
            self._send()
        return link.wait(self.conn, self.pending, "infer", self.deadline)[0]

    def _lend_slot(self, packed: bytes) -> dict:
        """The outputs as views of the slot, which is lent to them: it is reused
        only once all of them are garbage (shm_client.lend_outputs)."""
        try:
            outputs = lend_outputs(self.slot, self.conn, packed)
        except (TypeError, ValueError) as exc:
            self._drop_slot(False)
            raise DaemonError(f"the {self.exec_net._link.device} daemon sent a bad shared memory "
                              f"reply: {exc}") from None
        self.slot = None
        return outputs

    def _drop_slot(self, reusable: bool) -> None:
        slot, self.slot = self.slot, None
        if slot is not None:
            (give_back if reusable else discard)(self.conn, slot)

    def result(self, timeout: float | None = None) -> dict | None:
        """Outputs, or None when `timeout` (s) ran out first; raises the request's error."""
        if self._error is not None:
            raise self._error
        if self._outputs is not None:
            return self._outputs
        link = self.exec_net._link
        if timeout is not None and self.pending is not None and not self.pending.wait(timeout):
            if time.monotonic() < self.deadline:
                return None
        try:
            while True:
                try:
                    result = self._exchange()
                    break
                except RemoteError as exc:
                    self.pending = None
                    if exc.kind == "shm" and self.use_shm:
                        # the daemon dropped our slot (too many clients): use frames
                        self.use_shm = False
                        self._drop_slot(False)
                        continue
                    self._drop_slot(True)  # the daemon is done with it
                    if exc.kind == "handle" and not self.retried:
                        # the daemon no longer knows the network (restarted at the same
                        # endpoint): load it again and retry once
                        self.retried = True
                        self.exec_net._forget(self.conn, self.handle)
                        continue
                    raise remote_error(exc, link.device) from None
        except BaseException as exc:
            self._drop_slot(False)  # died / timed out: the daemon may still write to it
            self._error = exc
            raise
        self.exec_net._observe(result.get("compute_us"))
        self.perf = result.get("perf") if isinstance(result.get("perf"), list) else None
        placed = result.get("outputs_shm")
        if isinstance(placed, bytes) and self.slot is not None:
            outputs = self._lend_slot(placed)
        else:
            outputs = result.get("outputs")
            self._drop_slot(True)
        if not isinstance(outputs, dict):
            self._error = DaemonError(f"the {link.device} daemon sent a reply without outputs")
            raise self._error
        self._outputs = outputs
        return outputs

