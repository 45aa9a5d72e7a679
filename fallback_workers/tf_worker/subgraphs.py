"""The TensorFlow worker's sub-graph verbs: infer_subgraph (shapes and constant
values for the converter's shape-inference fallback), load_subgraph and
run_subgraph (the CPU daemon's TFCustomSubgraphCall layers, `convert --validate`).
The contract: core/services/tf_worker.py.

A graph is imported once per load into a tf.Graph of its own with a Session, and
run through a callable made for its fetches and feeds (Session.make_callable:
the cheapest way TensorFlow offers to run the same sub-graph again and again).
"""
from __future__ import annotations

import collections
import threading

import numpy as np

from core.microkernel import ALLOWED_DTYPES, RemoteError
from core.services import tf_ops
from core.services import tf_worker as contract

_PLACEHOLDERS = ("Placeholder",)
_FEEDABLE = _PLACEHOLDERS + ("PlaceholderWithDefault",)  # inputs a loaded sub-graph may be fed at (--input t)


def _first_lines(exc: Exception, n: int = 6) -> str:
    text = getattr(exc, "message", None) or str(exc)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "{}: {}".format(type(exc).__name__, "\n".join(lines[:n]))


class Subgraphs:
    """Every graph is checked against the allow-list (core/services/tf_ops.py) before
    TensorFlow imports it: what its outputs would run, function bodies included."""

    def __init__(self, tf):
        self.tf = tf
        self._loaded: collections.OrderedDict = collections.OrderedDict()
        self._buffers: collections.OrderedDict = collections.OrderedDict()  # name -> mmap of a buffer shared
        self._lock = threading.Lock()
        self.on_unmap = None  # called with the name of each buffer no longer kept mapped (bound_runs.py)

    # ----------------------------------------------------------------- import
    def _import(self, graph_bytes: bytes, outputs: list[str]):
        tf, tf1 = self.tf, self.tf.compat.v1
        graph_def = tf1.GraphDef()
        try:
            graph_def.ParseFromString(graph_bytes)
        except Exception as exc:  # protobuf's DecodeError
            raise RemoteError(contract.GRAPH, "the bytes sent are not a GraphDef: " + _first_lines(exc)) from None
        for node in graph_def.node:
            node.device = ""
        contract.check_allowed(graph_def, outputs, "the graph", allowed=tf_ops.RUN_OPS)  # (run again and again)
        graph = tf.Graph()
        try:
            with graph.as_default():
                tf1.import_graph_def(graph_def, name="")
        except Exception as exc:  # an op TensorFlow does not know, a type mismatch, a bad input name...
            raise RemoteError(contract.GRAPH, "TensorFlow cannot import the graph: " + _first_lines(exc)) from None
        return graph

    @staticmethod
    def _tensor(graph, name: str):
        try:
            return graph.get_tensor_by_name(name)
        except (KeyError, ValueError) as exc:
            raise RemoteError(contract.GRAPH, "the graph has no tensor '{}' ({})".format(name, exc)) from None

    def _session(self, graph):
        return self.tf.compat.v1.Session(graph=graph, config=self.tf.compat.v1.ConfigProto(
            device_count={"GPU": 0}))

    @staticmethod
    def _depends_on_placeholder(tensor) -> bool:
        seen, stack = set(), [tensor.op]
        while stack:
            op = stack.pop()
            if op.name in seen:
                continue
            seen.add(op.name)
            if op.type in _PLACEHOLDERS:
                return True
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
        return False

    @staticmethod
    def _dims(shape) -> list[int] | None:
        if shape.rank is None:
            return None
        return [-1 if d is None else int(d) for d in shape.as_list()]

    # ----------------------------------------------------------------- infer_subgraph
    def infer(self, args: dict, arrays: list):
        a = contract.parse_infer_subgraph(args, arrays)
        graph = self._import(a["graph"], a["outputs"])
        outputs = [self._tensor(graph, name) for name in a["outputs"]]
        placeholders = [op for op in graph.get_operations() if op.type in _PLACEHOLDERS]
        names = {op.outputs[0].name: op for op in placeholders}
        for name in a["given"]:
            if name not in names:
                raise RemoteError(contract.REQUEST, "'{}' is not a Placeholder of the graph".format(name))
        constant = [not self._depends_on_placeholder(t) for t in outputs]
        static = [self._dims(t.shape) for t in outputs]
        known = [s is not None and all(d >= 0 for d in s) for s in static]
        fed = {}
        shapes = list(static)
        values = [None] * len(outputs)
        with self._session(graph) as sess:
            wanted = [i for i, c in enumerate(constant) if c]
            if wanted:
                for i, value in zip(wanted, self._run(sess, [outputs[i] for i in wanted], {})):
                    values[i], shapes[i] = value, list(value.shape)
            ran = not all(k or c for k, c in zip(known, constant))
            if ran:
                feed = {}
                rng = np.random.default_rng(a["seed"])
                for name, op in names.items():
                    tensor = op.outputs[0]
                    if name in a["given"]:
                        feed[tensor] = self._given(tensor, a["given"][name])
                        fed[op.name] = "given"
                    else:
                        feed[tensor] = self._noise(tensor, rng)
                        fed[op.name] = "noise"
                todo = [i for i, c in enumerate(constant) if not c]
                for i, value in zip(todo, self._run(sess, [outputs[i] for i in todo], feed)):
                    shapes[i] = list(value.shape)
        described, sent = [], []
        for i, tensor in enumerate(outputs):
            value = values[i]
            send = (value is not None and value.size <= a["max_value_elements"] and
                    value.dtype.str in ALLOWED_DTYPES)
            if send:
                sent.append(np.require(value, requirements="C"))
            described.append({"shape": [int(d) for d in shapes[i]], "dtype": tensor.dtype.name,
                              "constant": constant[i], "value": bool(send)})
        return contract.infer_subgraph_result(described, ran, fed), sent

    def _run(self, sess, fetches, feed):
        try:
            return [np.asarray(v) for v in sess.run(fetches, feed)]
        except Exception as exc:  # tf.errors.OpError and friends: TensorFlow's message
            raise RemoteError(contract.RUN, "TensorFlow failed to run the graph: " + _first_lines(exc)) from None

    @staticmethod
    def _placeholder_shape(tensor) -> list[int]:
        dims = Subgraphs._dims(tensor.shape)
        if dims is None or any(d < 0 for d in dims):
            raise RemoteError(contract.GRAPH, "the Placeholder '{}' has the shape {}: TensorFlow needs its full "
                                              "shape to make an input for it".format(tensor.op.name, dims))
        return dims

    def _noise(self, tensor, rng):
        shape = self._placeholder_shape(tensor)
        dtype = tensor.dtype.as_numpy_dtype
        if tensor.dtype.is_floating:
            return rng.standard_normal(shape).astype(dtype)
        return np.zeros(shape, dtype=dtype)  # integer inputs are mostly indices: 0 is always valid

    @staticmethod
    def _given(tensor, array):
        if not tensor.shape.is_compatible_with(array.shape):
            raise RemoteError(contract.REQUEST, "the array given for '{}' has the shape {}, the Placeholder's is "
                                                "{}".format(tensor.op.name, list(array.shape), tensor.shape))
        return array.astype(tensor.dtype.as_numpy_dtype, copy=False)

    # ----------------------------------------------------------------- load / run
    def load(self, args: dict, arrays: list) -> dict:
        a = contract.parse_load_subgraph(args, arrays)
        with self._lock:
            entry = self._loaded.get(a["id"])
            if entry is not None:  # the id is the digest of graph, inputs and outputs: nothing to do again
                self._loaded.move_to_end(a["id"])
                return entry[3]
        graph = self._import(a["graph"], a["outputs"])
        inputs = [self._tensor(graph, name) for name in a["inputs"]]
        for tensor in inputs:
            if tensor.op.type not in _FEEDABLE:
                raise RemoteError(contract.GRAPH, "input '{}' is not a Placeholder ({})".format(tensor.name,
                                                                                              tensor.op.type))
        outputs = [self._tensor(graph, name) for name in a["outputs"]]
        sess = self._session(graph)
        try:
            runner = sess.make_callable(outputs, inputs)
        except Exception as exc:
            sess.close()
            raise RemoteError(contract.GRAPH, "TensorFlow cannot run these outputs: " + _first_lines(exc)) from None

        def describe(t):
            return {"name": t.name, "dtype": t.dtype.name, "shape": self._dims(t.shape)}
        result = {"id": a["id"], "inputs": [describe(t) for t in inputs], "outputs": [describe(t) for t in outputs]}
        entry = (sess, runner, [(t.dtype.as_numpy_dtype, t.shape, self._dims(t.shape)) for t in inputs], result)
        with self._lock:
            old = self._loaded.pop(a["id"], None)
            self._loaded[a["id"]] = entry
            evicted = [self._loaded.popitem(last=False)[1] for _ in range(len(self._loaded) - contract.MAX_SUBGRAPHS)]
        for old_entry in ([old] if old else []) + evicted:
            old_entry[0].close()
        return result

    def entry(self, graph_id: str):
        """(session, runner, input specs, load result) of a loaded graph; kind
        "unknown_subgraph" when it is not loaded."""
        with self._lock:
            entry = self._loaded.get(graph_id)
        if entry is None:
            raise RemoteError(contract.UNKNOWN_SUBGRAPH, "no sub-graph {} is loaded in this worker; load it "
                                                         "again".format(graph_id[:16]))
        return entry

    def runner(self, graph_id: str):
        """The callable of a loaded graph, None when it is not loaded (per request: no lock)."""
        entry = self._loaded.get(graph_id)
        return entry[1] if entry is not None else None

    def mapped(self, name: str) -> bool:
        return name in self._buffers

    def buffer(self, spec: dict):
        """The mapping of a buffer the parent shared (share): kind "unshared_buffer"
        when it is not (any more) mapped here - share it (again), then retry; kind
        "shm" when the request says another size (its spans were checked against
        that size, and bind_run's and run_subgraph's views are made of this map)."""
        name = spec.get("name")
        with self._lock:
            mm = self._buffers.get(name)
            if mm is not None:
                self._buffers.move_to_end(name)
        if mm is None:
            raise RemoteError(contract.UNSHARED, "no shared buffer {!r:.80} is mapped in this worker: share its "
                                                 "descriptor first".format(name))
        if len(mm) != spec.get("size"):
            raise RemoteError(contract.SHM, "the shared buffer {} has {} bytes, not {}".format(name, len(mm),
                                                                                            spec.get("size")))
        return mm

    def share(self, payload, fds: list) -> bytes:
        """The raw verb RAW_SHARE: map the buffer whose descriptor came with it."""
        from core.microkernel.direct import close_all
        from core.microkernel.shared_buffer import adopt
        try:
            name, size = contract.parse_share(payload, fds)
        except ValueError as exc:
            close_all(fds)
            raise RemoteError(contract.SHM, "cannot map the shared buffer: {}".format(exc)) from None
        try:
            mm = adopt(fds[0], name, size)  # (closes the descriptor, mapped or not: never closed twice, since
            # another thread may have been given its number in between)
        except (ValueError, OSError) as exc:
            raise RemoteError(contract.SHM, "cannot map the shared buffer: {}".format(exc)) from None
        with self._lock:
            old = self._buffers.pop(name, None)
            self._buffers[name] = mm
            # buffers the parent dropped stay mapped until evicted: past these bounds the least recently used go
            # (one still in use is shared again on its next request)
            dropped = []
            while len(self._buffers) > 1 and (len(self._buffers) > contract.MAX_SUBGRAPHS or sum(
                    len(m) for m in self._buffers.values()) > contract.MAX_MAPPED_BYTES):
                dropped.append(self._buffers.popitem(last=False)[0])
        for gone in dropped + ([name] if old is not None else []):
            if self.on_unmap is not None:
                self.on_unmap(gone)
        return contract.RUN_REPLY.pack(contract.RUN_OK)

    def run(self, args: dict, arrays: list):
        graph_id, inputs, shm = contract.parse_run_subgraph(args, arrays)
        mm = None
        if shm is not None:
            mm = self.buffer(shm["buffer"])
            inputs = [np.ndarray(shape, np.float32, buffer=mm, offset=offset) for offset, shape in shm["inputs"]]
        with self._lock:
            entry = self._loaded.get(graph_id)
            if entry is not None:
                self._loaded.move_to_end(graph_id)
        if entry is None:
            raise RemoteError(contract.UNKNOWN_SUBGRAPH, "no sub-graph {} is loaded in this worker; load it "
                                                         "again".format(graph_id[:16]))
        _, runner, specs, _ = entry
        if len(inputs) != len(specs):
            raise RemoteError(contract.REQUEST, "the sub-graph takes {} inputs, got {}".format(len(specs),
                                                                                            len(inputs)))
        feed = []
        for i, (array, (dtype, shape, dims)) in enumerate(zip(inputs, specs)):
            # (plain Python: TensorShape.is_compatible_with costs ~3 us a call here, on every request)
            if dims is not None and (len(dims) != array.ndim or any(
                    d >= 0 and d != n for d, n in zip(dims, array.shape))):
                raise RemoteError(contract.REQUEST, "input {} has the shape {}, the sub-graph takes {}".format(
                    i, list(array.shape), shape))
            feed.append(array if array.dtype == dtype else array.astype(dtype))
        try:
            outputs = runner(*feed)
        except Exception as exc:
            raise RemoteError(contract.RUN, "TensorFlow failed to run the sub-graph: " + _first_lines(exc)) from None
        if mm is not None:
            return self._place(mm, shm["out"], outputs), []
        result = []
        for out in outputs:
            out = np.require(out, requirements="C")  # (keeps 0-d arrays 0-d)
            if out.dtype.str not in ALLOWED_DTYPES:
                raise RemoteError(contract.RUN, "the sub-graph computes a {} tensor, which cannot be sent back; "
                                                "only numbers can".format(out.dtype))
            result.append(out)
        return {}, result

    @staticmethod
    def _place(mm, start: int, outputs) -> dict:
        from core.microkernel.shared_buffer import align
        placed, pos = [], start
        for out in outputs:
            out = np.asarray(out)
            pos = align(pos)
            if out.dtype.kind not in "biuf":
                raise RemoteError(contract.RUN, "the sub-graph computes a {} tensor; only numbers can be sent "
                                                "back".format(out.dtype))
            if pos + 4 * out.size > len(mm):
                raise RemoteError(contract.SHM, "the outputs need more than the {} bytes of the shared buffer".format(
                    len(mm)))
            np.copyto(np.ndarray(out.shape, np.float32, buffer=mm, offset=pos), out, casting="unsafe")
            placed.append([pos, list(out.shape)])
            pos += 4 * out.size
        return {"placed": placed}

    def close(self):
        with self._lock:
            entries = list(self._loaded.values())
            self._loaded.clear()
        for entry in entries:
            entry[0].close()
