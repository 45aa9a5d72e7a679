"""Bound runs of loaded sub-graphs (the verbs bind_run and the raw RAW_RUN; the
contract: core/services/tf_worker.py).

The daemon runs an offloaded layer again and again through the same shared buffer.
Once a run_subgraph went through, it binds those runs: the views of the buffer and
where the outputs go are made and checked once, here; each later run is an 8-byte
raw datagram on the local carrier's Unix socket and a 4-byte status back, with no msgpack
and no per-request checks on either side (measured: ~0.25 ms of Python per call on
this project's 2-core VM, a quarter of an Erf layer's whole overhead).
"""
from __future__ import annotations

import collections
import secrets
import threading

import numpy as np

from core.microkernel import RemoteError
from core.services import tf_worker as contract


class _Binding:
    __slots__ = ("graph_id", "buffer", "feed", "outputs")

    def __init__(self, graph_id: str, buffer: str, feed: list, outputs: list):
        self.graph_id, self.buffer, self.feed, self.outputs = graph_id, buffer, feed, outputs


class BoundRuns:
    """The bindings of one worker, over its Subgraphs (their graphs and buffers)."""

    def __init__(self, subgraphs):
        self.subgraphs = subgraphs
        self._table: collections.OrderedDict[int, _Binding] = collections.OrderedDict()
        self._lock = threading.Lock()

    def bind(self, args: dict, arrays: list) -> dict:
        graph_id, shm, placed = contract.parse_bind_run(args)
        entry = self.subgraphs.entry(graph_id)
        specs = entry[2]
        if len(shm["inputs"]) != len(specs):
            raise RemoteError(contract.REQUEST, "the sub-graph takes {} inputs, got {}".format(len(specs),
                                                                                            len(shm["inputs"])))
        if len(placed) != len(entry[3]["outputs"]):
            raise RemoteError(contract.REQUEST, "the sub-graph has {} outputs, {} were placed".format(
                len(entry[3]["outputs"]), len(placed)))
        mm = self.subgraphs.buffer(shm["buffer"])
        feed = []
        for i, ((offset, shape), (dtype, _, dims)) in enumerate(zip(shm["inputs"], specs)):
            if dtype != np.float32:
                raise RemoteError(contract.REQUEST, "input {} is {}: only float32 inputs are bound".format(
                    i, np.dtype(dtype).name))
            if dims is not None and (len(dims) != len(shape) or any(d >= 0 and d != n for d, n in zip(dims, shape))):
                raise RemoteError(contract.REQUEST, "input {} has the shape {}, the sub-graph takes {}".format(
                    i, list(shape), dims))
            feed.append(np.ndarray(shape, np.float32, buffer=mm, offset=offset))
        outputs = [np.ndarray(shape, np.float32, buffer=mm, offset=offset) for offset, shape in placed]
        binding = _Binding(graph_id, shm["buffer"]["name"], feed, outputs)
        with self._lock:
            bid = secrets.randbits(62) + 1
            self._table[bid] = binding
            while len(self._table) > contract.MAX_BINDINGS:
                self._table.popitem(last=False)
        return {"binding": bid}

    def run(self, payload) -> bytes:
        """The raw verb RAW_RUN."""
        if len(payload) != contract.RUN_REQUEST.size:
            return contract.RUN_REPLY.pack(contract.RUN_FAILED)
        (bid,) = contract.RUN_REQUEST.unpack(payload)
        b = self._table.get(bid)
        runner = self.subgraphs.runner(b.graph_id) if b is not None else None
        if runner is None or not self.subgraphs.mapped(b.buffer):
            return contract.RUN_REPLY.pack(contract.RUN_UNKNOWN)
        try:
            results = runner(*b.feed)
            for view, value in zip(b.outputs, results):
                value = np.asarray(value)
                if value.shape != view.shape or value.dtype.kind not in "biuf":
                    return contract.RUN_REPLY.pack(contract.RUN_FAILED)  # run_subgraph then says what it is
                np.copyto(view, value, casting="unsafe")
        except Exception:  # noqa: BLE001 - TensorFlow's error: run_subgraph reports it
            return contract.RUN_REPLY.pack(contract.RUN_FAILED)
        return contract.RUN_REPLY.pack(contract.RUN_OK)

    def forget_buffer(self, name: str) -> None:
        """The buffer is no longer mapped here: its bindings go (they would keep it mapped)."""
        with self._lock:
            for bid in [bid for bid, b in self._table.items() if b.buffer == name]:
                del self._table[bid]
