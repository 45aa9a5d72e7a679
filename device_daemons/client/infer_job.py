"""One inference request on the wire (InferJob, behind ExecutableNetwork.infer and
InferRequest in api.py): loads the network on the current daemon if needed,
sends the inputs through a shared-memory slot (shm_client.py) or as array frames,
through the link's Client (async) or on the calling thread's own socket (sync: to
the daemon's fast lane for networks it computes in well under a millisecond), and
retries what can be retried: a slot the daemon dropped (frames then), a handle the
daemon does not know (restarted at the same endpoint: load again, once), the fast
lane refusing the network (the main endpoint then).

What a job needs of the network it runs is the small LoadedNetwork interface
below (ExecutableNetwork implements it), not the network's internals.
"""
from __future__ import annotations

import time
from typing import Protocol

from core.microkernel import ProtocolError, RemoteError

from .. import contract
from ..shm_protocol import align
from .daemon import DaemonError
from .errors import remote_error
from .shm_client import ShmSlot, write_inputs
from .transport import Connection, Link


class LoadedNetwork(Protocol):
    """A network a job can run (see ExecutableNetwork)."""

    link: Link
    perf_count: bool  # ask the daemon for per-step times (the reply's "perf")

    def loaded(self, deadline: float) -> tuple[Connection, int]:
        """(connection, handle) of the network on the current daemon, loading it
        there first when needed."""

    def forget(self, conn: Connection, handle: int) -> None:
        """The daemon no longer knows `handle`: load again on the next request."""

    def observe(self, compute_us) -> None:
        """Take the daemon's compute time of a request (it picks the lane)."""

    @property
    def fast(self) -> bool:
        """Send synchronous requests to the daemon's fast lane?"""

    def refused_fast(self) -> None:
        """The fast lane refused the network: use the main endpoint."""

    @property
    def output_bytes(self) -> int:
        """Bytes of all outputs, each aligned as in a slot."""


class InferJob:
    """One inference request: sent through the link's thread-safe Client (async) or
    on the calling thread's own socket (sync)."""

    def __init__(self, net: LoadedNetwork, inputs: dict, timeout: float | None, sync: bool = False):
        self.net = net
        self.link = net.link
        self.inputs = inputs
        self.timeout = self.link.settings.timeout if timeout is None else timeout
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

    def _args(self) -> dict:
        """The args of the request; takes a shared-memory slot when it can."""
        conn, handle = self.net.loaded(self.deadline)
        self.conn, self.handle = conn, handle
        if self.use_shm:
            need = sum(align(a.nbytes) for a in self.inputs.values()) + self.net.output_bytes
            slot = conn.slots.take(need)
            if slot is not None:
                self.slot = slot
                return contract.infer_request(handle, shm=write_inputs(slot, self.inputs), perf=self.net.perf_count)
        return contract.infer_request(handle, inputs=self.inputs, perf=self.net.perf_count)

    def _send(self) -> None:
        args = self._args()
        try:
            self.pending = self.link.send(self.conn, contract.INFER, args)
        except BaseException:
            self._drop_slot(False)
            raise

    def _exchange(self) -> dict:
        """One attempt: the reply's result (raises RemoteError, DaemonDied, ...)."""
        if self.sync:
            args = self._args()
            if self.net.fast and self.conn.fast is not None:
                try:
                    return self.link.call_here(self.conn, contract.INFER, args, self.deadline, fast=True)
                except RemoteError as exc:
                    if exc.kind != contract.NOT_FAST:
                        raise
                    self.net.refused_fast()  # the daemon says no: the main endpoint then
            return self.link.call_here(self.conn, contract.INFER, args, self.deadline)
        if self.pending is None:
            self._send()
        return self.link.wait(self.conn, self.pending, contract.INFER, self.deadline)[0]

    def _lend_slot(self, placed: dict) -> dict:
        """The outputs as views of the slot, which is lent to them: it is reused
        only once all of them are garbage (SlotPool.lend_outputs)."""
        try:
            outputs = self.conn.slots.lend_outputs(self.slot, placed)
        except ValueError as exc:
            self._drop_slot(False)
            raise DaemonError(f"the {self.link.device} daemon sent a bad shared memory reply: {exc}") from None
        self.slot = None
        return outputs

    def _drop_slot(self, reusable: bool) -> None:
        slot, self.slot = self.slot, None
        if slot is not None:
            (self.conn.slots.give_back if reusable else self.conn.slots.discard)(slot)

    def result(self, timeout: float | None = None) -> dict | None:
        """Outputs, or None when `timeout` (s) ran out first; raises the request's error."""
        if self._error is not None:
            raise self._error
        if self._outputs is not None:
            return self._outputs
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
                    if exc.kind == contract.SHM and self.use_shm:
                        # the daemon dropped our slot (too many clients): use frames
                        self.use_shm = False
                        self._drop_slot(False)
                        continue
                    self._drop_slot(True)  # the daemon is done with it
                    if exc.kind == contract.HANDLE and not self.retried:
                        # the daemon no longer knows the network (restarted at the same
                        # endpoint): load it again and retry once
                        self.retried = True
                        self.net.forget(self.conn, self.handle)
                        continue
                    raise remote_error(exc, self.link.device) from None
        except BaseException as exc:
            self._drop_slot(False)  # died / timed out: the daemon may still write to it
            self._error = exc
            raise
        try:
            outputs, placed, compute_us = contract.check_infer_result(result)
            perf = contract.check_perf(result)
            if placed is not None and self.slot is None:
                raise ProtocolError("outputs placed in shared memory for a request without a slot")
        except ProtocolError as exc:
            self._drop_slot(False)
            self._error = DaemonError(f"the {self.link.device} daemon broke the contract: {exc}")
            raise self._error from None
        self.net.observe(compute_us)
        self.perf = perf
        if placed is not None:
            outputs = self._lend_slot(placed)
        else:
            self._drop_slot(True)
        self._outputs = outputs
        return outputs
