"""The client's side of bound requests (the protocol: bound_protocol.py): how a
request travels on the daemon's local carrier (request_path.py decides when).

A BoundRequests belongs to one ExecutableNetwork on one daemon connection (one
handle, one set of input shapes). It keeps bindings, each with a shared-memory slot
of its own, and runs a request through a free one: the inputs are copied into the
slot, one datagram of a few dozen bytes goes each way over the carrier's Unix socket (the
calling thread's own connection, served by a daemon thread of its own), and the
outputs are views of the slot. The slot is lent to them: a binding whose last
outputs are still referenced is not used again until they are garbage; up to
MAX_BINDINGS bindings lend their outputs so, beyond that a request runs through a
binding of its own whose outputs are copied out (a caller that keeps every result
costs a copy per request, never a slot per request).

`run` returns None whenever the fallback (request_path.py) must run the request
instead: inputs of other names or shapes, or no slot or binding to be had (the
daemon refuses it; the fallback's error reply then says what is wrong, if
anything). A binding the daemon dropped is bound again at once. A request that
failed raises the daemon's error (InferenceError, DaemonError) and is not run
again; the daemon's death or a timeout raise as they do on the fallback.
"""
from __future__ import annotations

import math
import threading
import weakref

import msgpack
import numpy as np

from core.microkernel import ProtocolError, RemoteError

from .. import bound_protocol as bound
from .. import contract
from ..shm_protocol import align
from .daemon import DaemonError
from .errors import remote_error
from .shm_client import ShmSlot
from .transport import Connection, Deadline, Link

MAX_BINDINGS = 4


class _Binding:
    """One binding: its id, slot, the slot's input views, where the outputs are
    [(name, offset, shape)] and a weak reference to what holds the outputs lent last
    (None: it copies its outputs out)."""
    __slots__ = ("id", "slot", "inputs", "outputs", "lent", "lends")

    def __init__(self, bid: int, slot: ShmSlot, inputs: dict, outputs: list, lends: bool):
        self.id, self.slot, self.inputs, self.outputs = bid, slot, inputs, outputs
        self.lent = None
        self.lends = lends

    def free(self) -> bool:
        """No output it lent is still referenced."""
        return self.lent is None or self.lent() is None


class BoundRequests:
    """The bound requests of one network on one connection (see the module doc)."""

    def __init__(self, link: Link, conn: Connection, handle: int, inputs: dict, output_bytes: int):
        self.link, self.conn, self.handle = link, conn, handle
        self.shapes = {name: tuple(shape) for name, shape in inputs.items()}
        self.output_bytes = output_bytes
        self._free: list[_Binding] = []
        self._lending = 0  # bindings that lend their outputs, made and not discarded
        self._lock = threading.Lock()
        self.closed = False

    def serves(self, conn: Connection, handle: int, inputs: dict) -> bool:
        if conn is not self.conn or handle != self.handle or len(inputs) != len(self.shapes):
            return False
        for name, shape in inputs.items():  # (loops, not generators: this runs per request)
            if self.shapes.get(name) != tuple(shape):
                return False
        return True

    # ----------------------------------------------------------------- requests
    def run(self, inputs: dict, deadline: Deadline, spin: float) -> tuple[dict, int, bool] | None:
        """(outputs, the daemon's compute time in us, whether it left a CPU free:
        bound_protocol.SPARE_CPU) of one request, polling for the reply for `spin` s;
        None: run it on the fallback (module doc)."""
        shapes = self.shapes
        if len(inputs) != len(shapes):
            return None
        for name, arr in inputs.items():
            if shapes.get(name) != arr.shape:
                return None
        for _ in range(2):  # a binding the daemon dropped is bound again once
            b = self._take(deadline)
            if b is None:
                return None
            for name, arr in inputs.items():
                b.inputs[name][...] = arr  # (np.copyto's dispatcher is a Python call more)
            try:
                reply = self.link.call_raw(self.conn, contract.INFER, bound.RAW_INFER, bound.REQUEST.pack(b.id),
                                           deadline, spin)
            except RemoteError:  # the carrier serves no such raw verb after all
                self._discard(b)
                return None
            except BaseException:
                self._discard(b)  # died / timed out: the daemon may still write to its slot
                raise
            if reply is None:  # the carrier cannot be reached after all
                self._discard(b)
                return None
            try:
                status, compute_us, flags, error = bound.check_reply(reply)
            except ProtocolError as exc:
                self._discard(b)
                raise DaemonError(f"the {self.link.device} daemon broke the contract: {exc}") from None
            if status == bound.BOUND_OK:
                return self._outputs(b), compute_us, bool(flags & bound.SPARE_CPU)
            if status == bound.BOUND_FAILED:
                self._put(b)
                raise remote_error(error, self.link.device)
            self._discard(b)  # BOUND_UNKNOWN
        return None

    def _outputs(self, b: _Binding) -> dict:
        holder = np.ndarray((b.slot.size,), np.uint8, buffer=b.slot.mm)
        outputs = {name: np.ndarray(shape, np.float32, buffer=holder, offset=off) for name, off, shape in b.outputs}
        if b.lends:
            b.lent = weakref.ref(holder)  # every output's .base is `holder`
        else:
            outputs = {name: value.copy() for name, value in outputs.items()}
        self._put(b)
        return outputs

    # ----------------------------------------------------------------- bindings
    def _take(self, deadline: Deadline) -> _Binding | None:
        with self._lock:
            if self.closed:
                return None
            for i, b in enumerate(self._free):  # a lending one whose outputs are garbage first
                if b.lends and b.free():
                    return self._free.pop(i)
            lends = self._lending < MAX_BINDINGS
            if lends:
                self._lending += 1
            else:
                for i, b in enumerate(self._free):
                    if not b.lends:
                        return self._free.pop(i)
        made = None
        try:
            made = self._bind(deadline, lends)
            return made
        finally:
            if made is None and lends:
                with self._lock:
                    self._lending -= 1

    def _bind(self, deadline: Deadline, lends: bool) -> _Binding | None:
        """A new binding (infer_bind on the carrier), None when the daemon will not
        bind (the fallback then says why, if anything is wrong)."""
        spec, views, pos = {}, {}, 0
        for name, shape in self.shapes.items():
            spec[name] = [pos, list(shape)]
            pos = align(pos + 4 * math.prod(shape))
        slot = self.conn.slots.take(pos + self.output_bytes)
        if slot is None:
            return None
        args = bound.bind_request(self.handle, msgpack.packb({"slot": slot.id, "inputs": spec,
                                                              "out": [pos, slot.size - pos]}))
        try:
            result = self.link.call_here(self.conn, bound.INFER_BIND, args, deadline, carrier=True)
            bid, outputs = bound.check_bind_result(result, slot.size)
        except RemoteError:
            self.conn.slots.discard(slot)
            return None
        except ProtocolError as exc:
            self.conn.slots.discard(slot)
            raise DaemonError(f"the {self.link.device} daemon broke the contract: {exc}") from None
        except BaseException:
            self.conn.slots.discard(slot)
            raise
        for name, (off, shape) in spec.items():
            views[name] = np.ndarray(shape, np.float32, buffer=slot.mm, offset=off)
        return _Binding(bid, slot, views, outputs, lends)

    def _put(self, b: _Binding) -> None:
        with self._lock:
            if not self.closed:
                self._free.append(b)
                return
        self._release(b)

    def _discard(self, b: _Binding) -> None:
        if b.lends:
            with self._lock:
                self._lending -= 1
        self.conn.slots.discard(b.slot)

    def _release(self, b: _Binding) -> None:
        """A binding no longer used: its slot goes back to the connection's pool when
        none of its outputs is referenced (else the daemon forgets it)."""
        (self.conn.slots.give_back if b.free() else self.conn.slots.discard)(b.slot)

    def close(self) -> None:
        """The network is closed or bound anew: give the slots back (the daemon drops
        the bindings of an unloaded network by itself)."""
        with self._lock:
            self.closed = True
            free, self._free = self._free, []
        for b in free:
            self._release(b)
