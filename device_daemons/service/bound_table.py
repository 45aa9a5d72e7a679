"""The daemon's bound requests (the protocol: bound_protocol.py): each binding is a
network handle with the views of one client slot, made once by infer_bind and run by
the raw verb RAW_INFER. At most MAX_BINDINGS are kept (the oldest are dropped: their
clients get BOUND_UNKNOWN and bind again); a binding also goes when its network is
unloaded or its slot is detached or dropped (BoundTable.drop_slot / drop_handle),
so none keeps a slot's memory mapped after that.
"""
from __future__ import annotations

import collections
import secrets
import threading

MAX_BINDINGS = 1024


class Binding:
    """One bound request: `handle` on `pool` (a reshape moves the handle to another
    pool: the binding is stale then), the slot, and the input and output views of it."""
    __slots__ = ("handle", "pool", "slot", "inputs", "outputs")

    def __init__(self, handle, pool, slot, inputs: dict, outputs: dict):
        self.handle, self.pool, self.slot = handle, pool, slot
        self.inputs, self.outputs = inputs, outputs


class BoundTable:
    """Bindings by their random id (one client cannot guess another's)."""

    def __init__(self, max_bindings: int = MAX_BINDINGS):
        self._table: collections.OrderedDict[int, Binding] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._max = max_bindings

    def __len__(self) -> int:
        return len(self._table)

    def add(self, binding: Binding) -> int:
        with self._lock:
            bid = secrets.randbits(62) + 1
            self._table[bid] = binding
            while len(self._table) > self._max:
                self._table.popitem(last=False)
        return bid

    def get(self, bid: int) -> Binding | None:
        return self._table.get(bid)

    def drop(self, bid: int) -> None:
        with self._lock:
            self._table.pop(bid, None)

    def _drop_where(self, match) -> None:
        with self._lock:
            for bid in [bid for bid, b in self._table.items() if match(b)]:
                del self._table[bid]

    def drop_slot(self, slot) -> None:
        """The slot was detached or dropped."""
        self._drop_where(lambda b: b.slot is slot)

    def drop_handle(self, handle) -> None:
        """The network was unloaded."""
        self._drop_where(lambda b: b.handle is handle)

    def clear(self) -> None:
        with self._lock:
            self._table.clear()
