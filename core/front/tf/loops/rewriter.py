"""The GraphDef a loop is unrolled in (core/front/tf/loops/unroll.py): the nodes it adds (copies, constants,
the slices and Packs of TensorLists), what it knows of the tensors outside the loop (constants, the shapes the graph
states, the lists made before the loop), and the TensorList / TensorArray ops followed at constant indices."""
from __future__ import annotations

import numpy as np

from core.front.tf.loader import tf_pb2
from core.front.tf.loops.values import FOLDED, MAX_FOLD, ListState, NotUnrolled, Value, fold
from core.front.tf.tensors import numpy_dtype, shape_of, tensor_to_numpy
from core.front.tf.tf_subgraph import set_const, tensor_key, tensor_ref

DT_INT32 = 3


LIST_OPS = {"TensorListReserve", "TensorListFromTensor", "TensorListSetItem", "TensorListGetItem",
            "TensorListLength", "TensorListStack", "TensorListGather", "TensorArrayV3", "TensorArrayScatterV3",
            "TensorArrayUnstack", "TensorArrayWriteV3", "TensorArrayReadV3", "TensorArraySizeV3",
            "TensorArrayGatherV3"}


class Rewriter:
    """The GraphDef being rewritten: its nodes, what the unroller added, what it knows of outside tensors."""

    def __init__(self, graph_def, input_shapes: dict):
        self.input_shapes = input_shapes
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
            raise NotUnrolled("'{}' reads a TensorList / TensorArray as a tensor".format(reader))
        if value.ref is None:
            if value.const is None or value.partial:
                raise NotUnrolled("'{}' reads a tensor with no value".format(reader))
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
        if any(partial) and (node.op != "StridedSlice" or any(partial[1:])):
            return None  # (only picking the known dimensions of a shape)
        with np.errstate(all="ignore"):
            out = fold(node.op, node, [v.const for v in inputs])
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
        if node.op in ("Placeholder", "PlaceholderWithDefault") and name in self.input_shapes:
            return list(self.input_shapes[name])  # (the user's shape first: over the graph's own and its notes)
        if "_output_shapes" in node.attr and len(node.attr["_output_shapes"].list.shape) > port:
            return shape_of(node.attr["_output_shapes"].list.shape[port])
        data = [t for t in node.input if not t.startswith("^")]
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
                except NotUnrolled:
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
            return [Value(items=ListState(dtype, size=self._int(inputs[1], node)))]
        if op == "TensorListFromTensor":
            return [Value(items=ListState(dtype, source=inputs[0]))]
        if op == "TensorArrayV3":
            return [Value(handle=True), Value(items=ListState(dtype, size=self._int(inputs[0], node)))]
        if op in ("TensorArrayScatterV3", "TensorArrayUnstack"):
            flow = self._list(inputs[3], node)
            if flow.items or flow.source is not None:
                raise NotUnrolled("'{}' scatters into a TensorArray that holds items".format(node.name))
            indices = inputs[1].const
            if not inputs[1].all_rows and (indices is None or not np.array_equal(indices.reshape(-1),
                                                                                   np.arange(indices.size))):
                raise NotUnrolled("'{}' scatters at indices other than 0, 1, 2...".format(node.name))
            return [Value(items=ListState(flow.dtype, source=inputs[2], size=flow.size))]
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
                raise NotUnrolled("the length of the list '{}' reads is not known".format(node.name))
            return [Value(const=np.array(the.size, np.int32), name=name)]
        if op == "TensorListStack":
            return [self._stack(self._list(inputs[0], node), None, name)]
        if op in ("TensorListGather", "TensorArrayGatherV3"):
            the = self._list(inputs[0] if op == "TensorListGather" else inputs[2], node)
            indices = inputs[1].const
            if indices is None and not inputs[1].all_rows:
                raise NotUnrolled("'{}' gathers at indices that are not constant".format(node.name))
            return [self._stack(the, None if indices is None else [int(i) for i in indices.reshape(-1)], name)]
        raise NotUnrolled("'{}' ({}) is not followed by the unroller".format(node.name, op))

    @staticmethod
    def _int(value: Value, node) -> int:
        if value.const is None or value.const.size != 1 or value.partial:
            raise NotUnrolled("'{}' reads an index or a size that is not a counter".format(node.name))
        return int(value.const.reshape(-1)[0])

    @staticmethod
    def _list(value: Value, node) -> ListState:
        if value.items is None:
            raise NotUnrolled("'{}' reads a list the unroller does not follow".format(node.name))
        return value.items

    def _item(self, the: ListState, index: int, name: str) -> Value:
        if index in the.items:
            return the.items[index]
        if the.source is None:
            raise NotUnrolled("'{}' reads item {} of a list where nothing was written".format(name, index))
        if index < 0:
            raise NotUnrolled("'{}' reads item {} of a list".format(name, index))
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

    def _stack(self, the: ListState, indices: list | None, name: str) -> Value:
        if indices is None:
            if not the.items and the.source is not None:
                return the.source
            size = the.size if the.size is not None else (
                len(the.items) if the.source is None and sorted(the.items) == list(range(len(the.items))) else None)
            if size is None or size <= 0:
                raise NotUnrolled("the length of the stacked list '{}' is not known".format(name))
            indices = list(range(size))
        rows = [self.ref(self._item(the, i, "{}/item_{}".format(name, i)), name) for i in indices]
        pack = self.emit("Pack", name, rows)
        node = self.new_nodes[-1]
        node.attr["T"].type = the.dtype
        node.attr["N"].i = len(rows)
        node.attr["axis"].i = 0
        return Value(ref=pack)
