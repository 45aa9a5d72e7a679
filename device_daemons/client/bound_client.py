"""The client's side of bound requests (the protocol: bound_protocol.py).

A BoundRequests belongs to one ExecutableNetwork on one daemon connection (one
handle, one set of input shapes). It keeps up to MAX_BINDINGS bindings, each with a
shared-memory slot of its own, and runs a synchronous request through a free one:
the inputs are copied into the slot, one 24-byte datagram goes each way over the
fast lane's Unix socket, and the outputs are views of the slot. As with the plain
shared-memory path (SlotPool.lend_outputs) the slot is lent to them: a binding whose
last outputs are still referenced is not used; another one is bound, and beyond
MAX_BINDINGS the request takes the plain path.

`run` returns None whenever the plain path (infer_job.py) must run the request
instead: no raw verb on this connection, inputs of other names or shapes, a binding
the daemon dropped (bound again next time), the fast lane refusing the network, or
a failed request (the plain path's error reply says why). The daemon's death or a
timeout raise as they do on the plain path.
"""
from __future__ import annotations

import math
import os
import threading
import weakref

import msgpack
import numpy as np

from core.microkernel import ProtocolError, RemoteError

from .. import bound_protocol as bound
from .. import contract
from ..shm_protocol import align
from .daemon import DaemonError
from .shm_client import ShmSlot
from .transport import Connection, Link

MAX_BINDINGS = 4


def enabled() -> bool:
    """MO_CORE_BOUND_REQUESTS=0 sends every request the plain way (to compare, or to rule
    bound requests out when something looks wrong)."""
    return os.environ.get("MO_CORE_BOUND_REQUESTS", "1") != "0"


class _Binding:
    """One binding: its id, slot, the slot's input views, where the outputs are
    [(name, offset, shape)] and a weak reference to what holds the outputs lent last."""
    __slots__ = ("id", "slot", "inputs", "outputs", "lent")

    def __init__(self, bid: int, slot: ShmSlot, inputs: dict, outputs: list):
        self.id, self.slot, self.inputs, self.outputs = bid, slot, inputs, outputs
        self.lent = None

    def free(self) -> bool:
        """No output it lent is still referenced."""
        return self.lent is None or self.lent() is None


class BoundRequests:
    """The bound requests of one network on one connection (see the module doc).
    `net` is the network's LoadedNetwork (observe / refused_fast), referenced weakly:
    the network's finalizer closes this object."""

    def __init__(self, net, link: Link, conn: Connection, handle: int, inputs: dict, output_bytes: int):
        self._net = weakref.ref(net)
        self.link, self.conn, self.handle = link, conn, handle
        self.shapes = {name: tuple(shape) for name, shape in inputs.items()}
        self.output_bytes = output_bytes
        self._free: list[_Binding] = []
        self._count = 0  # bindings made and not discarded
        self._lock = threading.Lock()
        self.usable = bound.RAW_INFER in conn.raw
        self.closed = False

    def serves(self, conn: Connection, handle: int, inputs: dict) -> bool:
        return (conn is self.conn and handle == self.handle and len(inputs) == len(self.shapes)
                and all(self.shapes.get(n) == tuple(s) for n, s in inputs.items()))

    # ----------------------------------------------------------------- requests
    def run(self, inputs: dict, deadline: float) -> dict | None:
        """The outputs of one request, or None: run it on the plain path (module doc)."""
        if not self.usable or len(inputs) != len(self.shapes):
            return None
        for name, arr in inputs.items():
            if self.shapes.get(name) != arr.shape:
                return None
        b = self._take(deadline)
        if b is None:
            return None
        for name, arr in inputs.items():
            np.copyto(b.inputs[name], arr)
        try:
            reply = self.link.call_raw(self.conn, contract.INFER, bound.RAW_INFER, bound.REQUEST.pack(b.id), deadline)
        except RemoteError:  # the daemon has no such raw verb after all, or it failed
            self.usable = False
            self._put(b)
            return None
        except BaseException:
            self._discard(b)  # died / timed out: the daemon may still write to its slot
            raise
        if reply is None or len(reply) != bound.REPLY.size:
            self.usable = False
            self._discard(b)
            return None
        status, compute_us = bound.REPLY.unpack(reply)
        if status == bound.BOUND_OK:
            holder = np.ndarray((b.slot.size,), np.uint8, buffer=b.slot.mm)
            outputs = {name: np.ndarray(shape, np.float32, buffer=holder, offset=off) for name, off, shape in b.outputs}
            b.lent = weakref.ref(holder)  # every output's .base is `holder`
            self._put(b)
            net = self._net()
            if net is not None:
                net.observe(compute_us)
            return outputs
        if status == bound.BOUND_UNKNOWN:
            self._discard(b)  # bound again next time
        else:
            self._put(b)
            net = self._net()
            if status == bound.BOUND_NOT_FAST and net is not None:
                net.refused_fast()
        return None

    # ----------------------------------------------------------------- bindings
    def _take(self, deadline: float) -> _Binding | None:
        with self._lock:
            for i, b in enumerate(self._free):
                if b.free():
                    return self._free.pop(i)
            if self._count >= MAX_BINDINGS or self.closed:
                return None
            self._count += 1
        made = None
        try:
            made = self._bind(deadline)
            return made
        finally:
            if made is None:
                with self._lock:
                    self._count -= 1

    def _bind(self, deadline: float) -> _Binding | None:
        """A new binding (infer_bind on the fast lane), None when the daemon will not
        bind (the plain path then says why, if anything is wrong)."""
        spec, views, pos = {}, {}, 0
        for name, shape in self.shapes.items():
            spec[name] = [pos, list(shape)]
            pos = align(pos + 4 * math.prod(shape))
        slot = self.conn.slots.take(pos + self.output_bytes)
        if slot is None:
            self.usable = False  # no shared memory with this daemon
            return None
        args = bound.bind_request(self.handle, msgpack.packb({"slot": slot.id, "inputs": spec,
                                                              "out": [pos, slot.size - pos]}))
        try:
            result = self.link.call_here(self.conn, bound.INFER_BIND, args, deadline, fast=True)
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
        return _Binding(bid, slot, views, outputs)

    def _put(self, b: _Binding) -> None:
        with self._lock:
            if not self.closed:
                self._free.append(b)
                return
        self._release(b)

    def _discard(self, b: _Binding) -> None:
        with self._lock:
            self._count -= 1
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
