"""While loops of a fixed trip count unrolled in the GraphDef, before the graph is built.

A while loop as a frozen graph holds it (TF1 frames: Enter, Merge, Switch, LoopCond,
NextIteration, Exit - what tf.while_loop, tf.scan and Keras' LSTM / GRU / SimpleRNN
leave once control flow v2 is lowered at freezing) is a cycle that no IR of ours
holds. The reference turned such loops into a TensorIterator; our IR v2 has none, so
a loop whose condition reads only counters and constants (a recurrent layer over a
sequence of known length) is unrolled: its body copied once per iteration, each copy
reading the loop variables the previous one computed, the counters folded to
constants on the way, and the TensorList / TensorArray reads and writes at those
constant indices turned into slices of the unstacked tensor and one Pack of the
written items. The loop's Exit nodes keep their names (an Identity of the final
value), so what reads them is unchanged.

Innermost loops first: a nested loop's copies become part of the outer body. A loop
whose condition depends on the data, or whose copies would pass MAX_ITERATIONS
iterations or MAX_NODES nodes, stays as it is (TensorFlow runs it with
--offload_unsupported_operations_to_tf) and the log says why. Conversion-time values
are small integer/bool tensors only (MAX_FOLD elements): a weight computed in the body
is copied as its nodes, not as a new constant per iteration.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from core.front.tf.constant_cond import read_names, without_orphans
from core.front.tf.loader import tf_pb2
from core.front.tf.tensors import numpy_dtype, shape_of, tensor_to_numpy
from core.front.tf.tf_subgraph import set_const, tensor_key, tensor_ref

log = logging.getLogger("mo_core")

MAX_ITERATIONS = 1000
MAX_NODES = 200_000      # copied nodes per loop
MAX_FOLD = 64            # elements of a value folded at conversion time
DT_INT32 = 3

_PASS = {"Identity", "Snapshot", "StopGradient", "Enter", "RefEnter", "Switch", "RefSwitch", "NextIteration",
         "RefNextIteration", "LoopCond", "Exit", "RefExit", "Merge", "RefMerge"}
_NO_VALUE = {"NoOp", "Assert", "ControlTrigger", "PrintV2"}


class _Abort(Exception):
    """This loop cannot be unrolled (the message says why)."""


@dataclass
class _List:
    """A TensorList / TensorArray as the unroller follows it: items written at constant
    indices over a tensor it was made from (its rows), and its length where known."""
    dtype: int
    source: "Value | None" = None
    items: dict = field(default_factory=dict)
    size: int | None = None

    def set(self, index: int, value: "Value") -> "_List":
        items = dict(self.items)
        items[index] = value
        return _List(self.dtype, self.source, items, self.size)


@dataclass
class Value:
    """One tensor of the unrolled graph: where it is (`ref`), its value where known at
    conversion time (`const`), or the list it stands for (`items`)."""
    ref: str | None = None
    const: np.ndarray | None = None
    items: _List | None = None
    name: str | None = None      # the Const node that holds `const` when nothing else does
    handle: bool = False         # a TensorArray handle: its state travels in the flow tensor
    all_rows: bool = False       # range(0, n) of an n not known here: a TensorArray's unstack / gather indices
    partial: bool = False        # `const` is a shape with unknown (-1) dimensions


_BINARY = {"Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply, "Maximum": np.maximum,
           "Minimum": np.minimum, "FloorDiv": np.floor_divide, "FloorMod": np.mod, "Less": np.less,
           "LessEqual": np.less_equal, "Greater": np.greater, "GreaterEqual": np.greater_equal, "Equal": np.equal,
           "NotEqual": np.not_equal, "LogicalAnd": np.logical_and, "LogicalOr": np.logical_or}
FOLDED = set(_BINARY) | {"LogicalNot", "Range", "Max", "Min", "Sum", "Prod", "Cast", "Pack", "Size", "StridedSlice"}


def _fold(op: str, node, values: list):
    """The op's value from constant inputs (op in FOLDED), or None where this module does not compute it."""
    a = values
    if op in _BINARY and len(a) == 2:
        out = _BINARY[op](a[0], a[1])
        return out.astype(a[0].dtype) if out.dtype != np.bool_ else out
    if op == "LogicalNot":
        return np.logical_not(a[0])
    if op == "Range":
        return np.arange(a[0], a[1], a[2]).astype(a[0].dtype)
    if op in ("Max", "Min", "Sum", "Prod"):
        axes = tuple(int(x) % max(a[0].ndim, 1) for x in a[1].reshape(-1)) if a[0].ndim else ()
        fn = {"Max": np.max, "Min": np.min, "Sum": np.sum, "Prod": np.prod}[op]
        keep = node.attr["keep_dims"].b if "keep_dims" in node.attr else False
        return np.asarray(fn(a[0], axis=axes, keepdims=keep) if axes else a[0]).astype(a[0].dtype)
    if op == "Cast":
        return a[0].astype(numpy_dtype(node.attr["DstT"].type, "node '{}'".format(node.name)))
    if op == "Pack":
        axis = node.attr["axis"].i if "axis" in node.attr else 0
        return np.stack(a, axis=axis)
    if op in ("Size",):
        return np.array(a[0].size, np.int32)
    if op == "StridedSlice":
        return _strided_slice(node, a)
    return None


def _strided_slice(node, a):
    """A 1-D StridedSlice (a dimension of a Shape), else None."""
    masks = {key: node.attr[key].i if key in node.attr else 0 for key in
             ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    if a[0].ndim != 1 or any(v.size != 1 for v in a[1:]) or masks["ellipsis_mask"] or masks["new_axis_mask"]:
        return None
    begin, end, stride = (int(v.reshape(-1)[0]) for v in a[1:])
    if masks["shrink_axis_mask"] & 1:
        return a[0][begin] if -a[0].size <= begin < a[0].size else None
    return a[0][None if masks["begin_mask"] & 1 else begin:None if masks["end_mask"] & 1 else end:stride]


class _Frame:
    """One loop: its nodes (`members`, in an order where inputs come first), unrolled."""

    def __init__(self, rewriter: "_Rewriter", frame: tuple, members: list[str]):
        self.rw, self.frame, self.members = rewriter, frame, members
        self.member_set = set(members)
        nodes = rewriter.nodes
        conds = [n for n in members if nodes[n].op == "LoopCond"]
        if len(conds) != 1:
            raise _Abort("it has {} LoopCond nodes".format(len(conds)))
        self.cond = conds[0]
        self.merges = [n for n in members if nodes[n].op in ("Merge", "RefMerge")]
        self.cond_part = self._ancestors(self.cond)
        self.emitted = 0

    def _ancestors(self, name: str) -> set:
        seen, stack = set(), [name]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if self.rw.nodes[n].op in ("Merge", "RefMerge", "Enter", "RefEnter"):
                continue
            stack.extend(m for m in (tensor_key(t.lstrip("^"))[0] for t in self.rw.nodes[n].input)
                         if m in self.member_set)
        return seen

    def _merge_inputs(self, name: str) -> tuple[str, str]:
        """(the Enter's input tensor, the NextIteration's input tensor) of a loop variable."""
        nodes = self.rw.nodes
        data = [t for t in nodes[name].input if not t.startswith("^")]
        enter = [t for t in data if nodes[tensor_key(t)[0]].op in ("Enter", "RefEnter")]
        nxt = [t for t in data if nodes[tensor_key(t)[0]].op in ("NextIteration", "RefNextIteration")]
        if len(enter) != 1 or len(nxt) != 1 or len(data) != 2:
            raise _Abort("its Merge '{}' is not one Enter and one NextIteration".format(name))
        enter_node, next_node = nodes[tensor_key(enter[0])[0]], nodes[tensor_key(nxt[0])[0]]
        return enter_node.input[0], next_node.input[0]

    def unroll(self) -> dict:
        """{Exit node name: its final Value}."""
        nodes = self.rw.nodes
        state = {m: self.rw.outside(self._merge_inputs(m)[0]) for m in self.merges}
        for k in range(MAX_ITERATIONS + 1):
            values: dict = {}
            for name in self.members:
                if name in self.cond_part:
                    self._evaluate(name, k, values, state)
            go = values[self.cond][0].const
            if go is None or go.size != 1:
                shapes = any(isinstance(v, list) and v[0].partial for v in values.values())
                raise _Abort("its condition is no counter against a constant: it reads " + (
                    "a dimension the graph leaves unknown (give the input's shape with --input_shape)" if shapes
                    else "the model's data"))
            if not bool(go.reshape(-1)[0]):
                return self._exits(state)
            if k == MAX_ITERATIONS:
                break
            for name in self.members:
                if name not in values and nodes[name].op not in ("Exit", "RefExit"):
                    self._evaluate(name, k, values, state)
            state = {m: self._value(self._merge_inputs(m)[1], values) for m in self.merges}
        raise _Abort("it runs more than {} iterations".format(MAX_ITERATIONS))

    def _exits(self, state: dict) -> dict:
        out = {}
        nodes = self.rw.nodes
        for name, node in self.rw.nodes.items():
            if node.op not in ("Exit", "RefExit") or not node.input:
                continue
            switch = tensor_key(node.input[0])[0]
            if switch not in self.member_set:
                continue
            merge = tensor_key(nodes[switch].input[0])[0]
            if nodes[switch].op not in ("Switch", "RefSwitch") or merge not in state:
                raise _Abort("its Exit '{}' does not read a loop variable's Switch".format(name))
            out[name] = state[merge]
        return out

    def _value(self, text: str, values: dict) -> Value:
        name, port = tensor_key(text)
        if name in self.member_set:
            ports = values.get(name)
            if ports is None:
                raise _Abort("'{}' is read before it is computed".format(name))
            return ports[port] if isinstance(ports, list) else ports(port)
        return self.rw.outside(text)

    def _evaluate(self, name: str, k: int, values: dict, state: dict) -> None:
        node = self.rw.nodes[name]
        op = node.op
        if op in _NO_VALUE:
            values[name] = [Value()]
            return
        if op in ("Merge", "RefMerge"):
            values[name] = [state[name], Value(const=np.array(1 if k else 0, np.int32),
                                                 name="{}/value_index/unrolled_{}".format(name, k))]
            return
        data = [t for t in node.input if not t.startswith("^")]
        inputs = [self._value(t, values) for t in data]
        if op in _PASS:
            values[name] = [inputs[0], inputs[0]]
            return
        if op == "Const":
            values[name] = [self.rw.hoisted(node)]
            return
        listed = self.rw.list_op(node, inputs, "{}/unrolled_{}".format(name, k))
        if listed is not None:
            values[name] = listed
            return
        folded = self.rw.folded(node, inputs, "{}/unrolled_{}".format(name, k))
        if folded is not None:
            values[name] = [folded]
            return
        self.emitted += 1
        if self.emitted > MAX_NODES:
            raise _Abort("its copies would pass {} nodes".format(MAX_NODES))
        clone = self.rw.emit(node.op, "{}/unrolled_{}".format(name, k), [self.rw.ref(v, name) for v in inputs],
                             node)
        values[name] = lambda port, c=clone: Value(ref=tensor_ref(c, port))


class _Rewriter:
    """The GraphDef being rewritten: its nodes, what the unroller added, what it knows of outside tensors."""

    def __init__(self, graph_def, input_shapes: dict):
        self.graph_def, self.input_shapes = graph_def, input_shapes
        self.nodes = {n.name: n for n in graph_def.node}
        self.new_nodes: list = []
        self.names = set(self.nodes)
        self.memo: dict = {}

    # -- emitting nodes
    def emit(self, op: str, name: str, inputs: list[str], like=None):
        node = tf_pb2().NodeDef()
        if like is not None:
            node.CopyFrom(like)
            del node.input[:]
        node.name, node.op = self._unique(name), op
        node.input.extend(inputs)
        self.new_nodes.append(node)
        self.names.add(node.name)
        return node.name

    def _unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.names:
            name, k = "{}_{}".format(base, k), k + 1
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        node = tf_pb2().NodeDef()
        node.name = self._unique(name)
        set_const(node, value)
        self.new_nodes.append(node)
        self.names.add(node.name)
        return node.name

    def hoisted(self, node) -> Value:
        """A Const of the loop's body, once outside it (its control input put it in the frame only)."""
        key = ("hoisted", node.name)
        if key not in self.memo:
            copy = tf_pb2().NodeDef()
            copy.CopyFrom(node)
            del copy.input[:]
            copy.name = self._unique(node.name + "/hoisted")
            self.new_nodes.append(copy)
            self.names.add(copy.name)
            self.memo[key] = Value(ref=copy.name, const=self._small(node))
        return self.memo[key]

    def ref(self, value: Value, reader: str) -> str:
        """The tensor holding `value` (a Const emitted for a folded value the first time it is read)."""
        if value.items is not None or value.handle:
            raise _Abort("'{}' reads a TensorList / TensorArray as a tensor".format(reader))
        if value.ref is None:
            if value.const is None or value.partial:
                raise _Abort("'{}' reads a tensor with no value".format(reader))
            value.ref = self.const(value.name or reader + "/folded", value.const)
        return value.ref

    @staticmethod
    def _small(node):
        if node.op != "Const" or "value" not in node.attr:
            return None
        tensor = node.attr["value"].tensor
        count = 1
        for d in tensor.tensor_shape.dim:
            count *= max(int(d.size), 0)
        if count > MAX_FOLD or int(tensor.dtype) in (1, 2, 14, 19):  # (floats are data, never counters)
            return None
        return tensor_to_numpy(tensor, "the constant '{}'".format(node.name))

    # -- values
    def folded(self, node, inputs: list, name: str) -> Value | None:
        if not inputs or any(v.const is None for v in inputs):
            return None
        partial = [v.partial for v in inputs]
        if any(partial) and (node.op not in ("StridedSlice", "Identity") or any(partial[1:])):
            return None  # (only picking the known dimensions of a shape)
        with np.errstate(all="ignore"):
            out = _fold(node.op, node, [v.const for v in inputs])
        if out is None or np.asarray(out).size > MAX_FOLD:
            return None
        out = np.asarray(out)
        unknown = partial[0] and bool((out < 0).any())
        return Value(const=out, name=name, partial=unknown)

    def static_shape(self, text: str, depth: int = 0) -> list | None:
        """The shape of a tensor outside the loop as the graph states it (-1: unknown), None if it does not:
        a Placeholder's, through Identity and Transpose, or an `_output_shapes` attribute."""
        name, port = tensor_key(text)
        node = self.nodes.get(name)
        if node is None or depth > 64:
            return None
        if "_output_shapes" in node.attr and len(node.attr["_output_shapes"].list.shape) > port:
            return shape_of(node.attr["_output_shapes"].list.shape[port])
        data = [t for t in node.input if not t.startswith("^")]
        if node.op in ("Placeholder", "PlaceholderWithDefault") and name in self.input_shapes:
            return list(self.input_shapes[name])
        if node.op in ("Placeholder", "PlaceholderWithDefault") and "shape" in node.attr:
            return shape_of(node.attr["shape"].shape)
        if node.op in ("Identity", "Snapshot", "StopGradient") and data:
            return self.static_shape(data[0], depth + 1)
        if node.op == "Transpose" and len(data) == 2:
            shape, perm = self.static_shape(data[0], depth + 1), self.outside(data[1], depth + 1).const
            if shape is not None and perm is not None and sorted(perm.reshape(-1).tolist()) == list(range(len(shape))):
                return [shape[int(i)] for i in perm.reshape(-1)]
        return None

    def outside(self, text: str, depth: int = 0) -> Value:
        """What the unroller knows of a tensor outside the loop (it stays where it is)."""
        name, port = tensor_key(text)
        key = (name, port)
        if key in self.memo:
            return self.memo[key]
        node = self.nodes.get(name)
        value = Value(ref=tensor_ref(name, port))
        if node is not None and depth < 64:
            data = [t for t in node.input if not t.startswith("^")]
            if node.op == "Const":
                value.const = self._small(node)
            elif node.op == "Shape" and data:
                shape = self.static_shape(data[0], depth + 1)
                if shape is not None:
                    dtype = numpy_dtype(node.attr["out_type"].type, name) if "out_type" in node.attr else np.int32
                    value.const, value.partial = np.array(shape, dtype), any(d < 0 for d in shape)
            elif node.op in ("Identity", "Snapshot", "StopGradient") and data:
                inner = self.outside(data[0], depth + 1)
                value = Value(ref=value.ref, const=inner.const, items=inner.items, handle=inner.handle)
            elif node.op in LIST_OPS:
                try:
                    listed = self.list_op(node, [self.outside(t, depth + 1) for t in data], name + "/unrolled")
                    value = listed[port]  # (a length is a Const of its own, a stacked list a Pack)
                except _Abort:
                    pass  # (a list made by a loop not unrolled yet: its reader stays a tensor of the graph)
            elif node.op in FOLDED:
                inputs = [self.outside(t, depth + 1) for t in data]
                folded = self.folded(node, inputs, name)
                if folded is not None:
                    value.const, value.partial = folded.const, folded.partial
                elif node.op == "Range" and len(inputs) == 3 and all(
                        v.const is not None and v.const.size == 1 for v in (inputs[0], inputs[2])):
                    value.all_rows = int(inputs[0].const.reshape(-1)[0]) == 0 == int(inputs[2].const.reshape(-1)[0]) - 1
        self.memo[key] = value
        return value

    # -- TensorList / TensorArray
    def list_op(self, node, inputs: list, name: str) -> list | None:
        """The op's outputs (one Value per port) if it is a TensorList / TensorArray op, else None."""
        op = node.op
        if op not in LIST_OPS:
            return None
        dtype = int(node.attr["element_dtype"].type) if "element_dtype" in node.attr else \
            int(node.attr["dtype"].type) if "dtype" in node.attr else None
        if op == "TensorListReserve":
            return [Value(items=_List(dtype, size=self._int(inputs[1], node)))]
        if op == "TensorListFromTensor":
            return [Value(items=_List(dtype, source=inputs[0]))]
        if op == "TensorArrayV3":
            return [Value(handle=True), Value(items=_List(dtype, size=self._int(inputs[0], node)))]
        if op in ("TensorArrayScatterV3", "TensorArrayUnstack"):
            flow = self._list(inputs[3], node)
            if flow.items or flow.source is not None:
                raise _Abort("'{}' scatters into a TensorArray that holds items".format(node.name))
            indices = inputs[1].const
            if not inputs[1].all_rows and (indices is None or not np.array_equal(indices.reshape(-1),
                                                                                   np.arange(indices.size))):
                raise _Abort("'{}' scatters at indices other than 0, 1, 2...".format(node.name))
            return [Value(items=_List(flow.dtype, source=inputs[2], size=flow.size))]
        if op == "TensorListSetItem":
            return [Value(items=self._list(inputs[0], node).set(self._int(inputs[1], node), inputs[2]))]
        if op == "TensorArrayWriteV3":
            return [Value(items=self._list(inputs[3], node).set(self._int(inputs[1], node), inputs[2]))]
        if op == "TensorListGetItem":
            return [self._item(self._list(inputs[0], node), self._int(inputs[1], node), name)]
        if op == "TensorArrayReadV3":
            return [self._item(self._list(inputs[2], node), self._int(inputs[1], node), name)]
        if op in ("TensorListLength", "TensorArraySizeV3"):
            the = self._list(inputs[0] if op == "TensorListLength" else inputs[1], node)
            if the.size is None:
                raise _Abort("the length of the list '{}' reads is not known".format(node.name))
            return [Value(const=np.array(the.size, np.int32), name=name)]
        if op == "TensorListStack":
            return [self._stack(self._list(inputs[0], node), None, name)]
        if op in ("TensorListGather", "TensorArrayGatherV3"):
            the = self._list(inputs[0] if op == "TensorListGather" else inputs[2], node)
            indices = inputs[1].const
            if indices is None and not inputs[1].all_rows:
                raise _Abort("'{}' gathers at indices that are not constant".format(node.name))
            return [self._stack(the, None if indices is None else [int(i) for i in indices.reshape(-1)], name)]
        raise _Abort("'{}' ({}) is not followed by the unroller".format(node.name, op))

    @staticmethod
    def _int(value: Value, node) -> int:
        if value.const is None or value.const.size != 1 or value.partial:
            raise _Abort("'{}' reads an index or a size that is not a counter".format(node.name))
        return int(value.const.reshape(-1)[0])

    @staticmethod
    def _list(value: Value, node) -> _List:
        if value.items is None:
            raise _Abort("'{}' reads a list the unroller does not follow".format(node.name))
        return value.items

    def _item(self, the: _List, index: int, name: str) -> Value:
        if index in the.items:
            return the.items[index]
        if the.source is None:
            raise _Abort("'{}' reads item {} of a list where nothing was written".format(name, index))
        if index < 0:
            raise _Abort("'{}' reads item {} of a list".format(name, index))
        source = self.ref(the.source, name)
        key = ("row", source, index)
        if key not in self.memo:
            ints = [self.const("{}/{}".format(name, part), np.array([v], np.int32))
                    for part, v in (("begin", index), ("end", index + 1), ("strides", 1))]
            row = self.emit("StridedSlice", name, [source] + ints)
            node = self.new_nodes[-1]
            node.attr["T"].type = the.dtype
            node.attr["Index"].type = DT_INT32
            node.attr["shrink_axis_mask"].i = 1
            self.memo[key] = Value(ref=row)
        return self.memo[key]

    def _stack(self, the: _List, indices: list | None, name: str) -> Value:
        if indices is None:
            if not the.items and the.source is not None:
                return the.source
            size = the.size if the.size is not None else (
                len(the.items) if the.source is None and sorted(the.items) == list(range(len(the.items))) else None)
            if size is None or size <= 0:
                raise _Abort("the length of the stacked list '{}' is not known".format(name))
            indices = list(range(size))
        rows = [self.ref(self._item(the, i, "{}/item_{}".format(name, i)), name) for i in indices]
        pack = self.emit("Pack", name, rows)
        node = self.new_nodes[-1]
        node.attr["T"].type = the.dtype
        node.attr["N"].i = len(rows)
        node.attr["axis"].i = 0
        return Value(ref=pack)


LIST_OPS = {"TensorListReserve", "TensorListFromTensor", "TensorListSetItem", "TensorListGetItem",
            "TensorListLength", "TensorListStack", "TensorListGather", "TensorArrayV3", "TensorArrayScatterV3",
            "TensorArrayUnstack", "TensorArrayWriteV3", "TensorArrayReadV3", "TensorArraySizeV3",
            "TensorArrayGatherV3"}


def frames(graph_def) -> dict[str, tuple]:
    """Node name -> its frame (a tuple of loop names, () outside every loop), as TensorFlow
    assigns them: an Enter opens its frame_name, an Exit returns to the parent, any other
    node is where its first input is. {} where the graph has a cycle that no loop explains."""
    nodes = {n.name: n for n in graph_def.node}
    deps = {}
    for n in graph_def.node:
        ins = [tensor_key(t.lstrip("^"))[0] for t in n.input]
        if n.op in ("Merge", "RefMerge"):
            ins = [i for i in ins if i in nodes and nodes[i].op not in ("NextIteration", "RefNextIteration")]
        deps[n.name] = [i for i in ins if i in nodes]
    readers: dict = {name: [] for name in nodes}
    for name, ins in deps.items():
        for i in ins:
            readers[i].append(name)
    pending = {name: len(ins) for name, ins in deps.items()}
    ready = [name for name, count in pending.items() if count == 0]
    frame: dict[str, tuple] = {}
    while ready:
        name = ready.pop()
        n = nodes[name]
        first = [tensor_key(t)[0] for t in n.input if not t.startswith("^") and tensor_key(t)[0] in frame] \
            or [i for i in deps[name] if i in frame]
        parent = frame[first[0]] if first else ()
        if n.op in ("Enter", "RefEnter"):
            frame[name] = parent + (n.attr["frame_name"].s.decode("utf-8", "replace"),)
        elif n.op in ("Exit", "RefExit"):
            frame[name] = parent[:-1]
        else:
            frame[name] = parent
        for r in readers[name]:
            pending[r] -= 1
            if pending[r] == 0:
                ready.append(r)
    return frame if len(frame) == len(nodes) else {}


def unroll_loops(graph_def, keep=None, input_shapes: dict | None = None) -> int:
    """Unrolls every loop this module can (innermost first); the number unrolled. `keep(node)`: true for a node
    the user's offload patterns name - its loop stays whole, for TensorFlow to run. `input_shapes`: {Placeholder:
    dims} the user gave (--input_shape), over the graph's own. Returns the model outputs (nodes nothing read) that
    the copies now read - a TF1 loop's final state is its Exit, which the last copy's node now is: they stay
    outputs (core/front/tf/builder.py)."""
    outputs, refused = set(), set()
    while True:
        frame_of = frames(graph_def)
        loops = {f for f in frame_of.values() if f} - refused
        inner = [f for f in loops if not any(g != f and g[:len(f)] == f for g in frame_of.values())]
        if not inner:
            return outputs
        loop = sorted(inner)[0]
        order = [n.name for n in _in_order(graph_def, frame_of) if frame_of[n.name] == loop]
        rewriter = _Rewriter(graph_def, input_shapes or {})
        named = [name for name in order if keep is not None and keep(rewriter.nodes[name])]
        if named:
            log.info("The while loop '%s' is kept whole: the offload patterns name its node '%s'.", loop[-1], named[0])
            refused |= _with_outer(frame_of, loop)
            continue
        try:
            exits = _Frame(rewriter, loop, order).unroll()
            outputs |= _apply(graph_def, rewriter, set(order), exits)
        except _Abort as why:
            log.warning("The while loop '%s' is left as it is (TensorFlow runs it with "
                        "--offload_unsupported_operations_to_tf): it cannot be unrolled, as %s.", loop[-1], why)
            refused |= _with_outer(frame_of, loop)
            continue
        log.info("Unrolled the while loop '%s' (%d nodes added).", loop[-1], len(rewriter.new_nodes))


def _with_outer(frame_of: dict, loop: tuple) -> set:
    """The loop and those it is in (none of them can be unrolled while it stays)."""
    return {loop[:i] for i in range(1, len(loop) + 1)}


def _in_order(graph_def, frame_of: dict) -> list:
    """The nodes in an order where a node's inputs come first (NextIteration back edges apart)."""
    nodes = {n.name: n for n in graph_def.node}
    order, seen = [], set()
    for root in graph_def.node:
        stack = [(root.name, False)]
        while stack:
            name, expanded = stack.pop()
            if expanded:
                order.append(nodes[name])
                continue
            if name in seen:
                continue
            seen.add(name)
            stack.append((name, True))
            n = nodes[name]
            for t in n.input:
                i = tensor_key(t.lstrip("^"))[0]
                if i in nodes and i not in seen and not (
                        n.op in ("Merge", "RefMerge") and nodes[i].op in ("NextIteration", "RefNextIteration")):
                    stack.append((i, False))
    return order


def _apply(graph_def, rw: _Rewriter, members: set, exits: dict) -> set:
    """The loop's nodes replaced: its Exits by their final values, list readers after it by what they read; the
    names of the outputs of the model among them that copies now read."""
    replaced = {}
    list_exits = {name: value for name, value in exits.items() if value.items is not None or value.handle}
    for name, value in exits.items():
        if name not in list_exits:
            replaced[name] = value
    for node in graph_def.node:  # what reads a list the loop gave back: a Stack, a Gather, a Length of it
        if node.name in members or node.name in exits:
            continue
        data = [t for t in node.input if not t.startswith("^")]
        if not any(tensor_key(t)[0] in list_exits for t in data):
            continue
        if node.op not in LIST_OPS:
            raise _Abort("'{}' ({}) reads the list the loop gives back".format(node.name, node.op))
        for t in data:
            key = tensor_key(t)
            if key[0] in list_exits:
                rw.memo[key] = list_exits[key[0]]
        rw.memo.pop((node.name, 0), None)
        value = rw.list_op(node, [rw.outside(t) for t in data], node.name + "/unrolled")[0]
        if value.items is not None or value.handle:
            raise _Abort("'{}' ({}) makes another list of the loop's".format(node.name, node.op))
        replaced[node.name] = value
    for name, value in replaced.items():
        if value.ref is None:
            rw.ref(value, name)  # (a folded value: its Const)
    # a copy that computes a replaced node's value takes its name (a TF1 model's `rnn/while/Exit_3`, an output the
    # user knows, names the layer that computes it); other values are an Identity of that name
    emitted = {n.name for n in rw.new_nodes}
    renamed = {}
    for name, value in replaced.items():
        source, port = tensor_key(value.ref)
        if port == 0 and source in emitted and source not in renamed:
            renamed[source] = name
    read_before = read_names(graph_def.node) | emitted
    taking = {name: node for node in rw.new_nodes for source, name in renamed.items() if node.name == source}
    kept = []
    for node in graph_def.node:
        if node.name in taking:  # (the copy where the node was: the model's outputs keep their order)
            kept.append(taking[node.name])
            continue
        if node.name in members or node.name in list_exits:
            continue
        if node.name in replaced:
            dtype = next(node.attr[key].type for key in ("element_dtype", "dtype", "T") if key in node.attr)
            node.op = "Identity"
            node.input[:] = [replaced[node.name].ref]
            for key in list(node.attr):
                del node.attr[key]
            node.attr["T"].type = dtype
        node.input[:] = [t for t in node.input if not (t.startswith("^") and (t[1:] in members or
                                                                             t[1:] in list_exits))]
        kept.append(node)
    added = [node for node in rw.new_nodes if node.name not in renamed]
    for node in taking.values():
        node.name = renamed[node.name]
    for node in kept + added:
        for k, text in enumerate(node.input):
            source, port = tensor_key(text.lstrip("^"))
            if source in renamed:
                node.input[k] = ("^" if text.startswith("^") else "") + tensor_ref(renamed[source], port)
    kept = without_orphans(kept + added, read_before | set(renamed.values()))
    del graph_def.node[:]
    graph_def.node.extend(kept)
    return {name for name in renamed.values() if name not in read_before} & read_names(kept)
