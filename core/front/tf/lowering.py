"""TensorFlow ops -> IR layers, NHWC -> NCHW.

Runs once TensorFlow's own shapes and constant values are known (TFOp.infer):

1. every op whose outputs are all constants goes: its values live on in the
   data nodes, to become blobs or attributes of the layers that read them;
2. every other TF op becomes IR layers (its `lower`, with the `Lowering` helper
   below). A 4-D tensor is NCHW in the IR: its TF shape is permuted (0, 3, 1, 2),
   weights are transposed, axis attributes are mapped (`ir_axis`), and where a
   Reshape-like op needs TensorFlow's element order a Permute back to NHWC is
   put before it (and one to NCHW after it), as the reference guide explains;
3. a constant still read as a tensor (an Eltwise operand, a Concat part, a
   model output) becomes a `Const` layer;
   (A 4-D output of an op with `nchw_layout` set, which a front replacer made
   in IR layout already, e.g. DetectionOutput's [1, 1, N, 7], is not permuted.)
4. inputs get their IR shapes; with --disable_nhwc_to_nchw the model's 4-D
   inputs and outputs stay NHWC and Permutes convert at the boundary. A 5-D
   tensor keeps TensorFlow's order inside the IR (the 3-D layers read NCDHW
   between Permutes: ops/volume.py), but the model's 5-D inputs and outputs are
   NCDHW, as the reference made them and as 4-D ones are NCHW: Permutes at the
   boundary, which cancel against the 3-D layers' (not with
   --disable_nhwc_to_nchw);
5. IR shape inference runs over the new layers, and every tensor that TF
   inference knew must come out with the same shape in IR layout: a lowering
   that disagrees is an internal error, not a wrong IR.
Ops that cannot be lowered in the form they are used (e.g. a conversion-time-only
op on data) are collected and reported all at once. `Composer` builds an op that is
several element-wise layers (Atan2, FloorMod, ...) over its output's shape.
"""
from __future__ import annotations


import numpy as np

from core.errors import Error
from core.front.tf.tensors import describe
from core.front.tf.tf_subgraph import tensor_dtype
from core.ops.activation import Power
from core.ops.const import Const
from core.ops.linear import Eltwise
from core.ops.shape_ops import Permute


TO_NCHW = (0, 3, 1, 2)     # ir[i] = tf[TO_NCHW[i]]
TO_NHWC = (0, 2, 3, 1)
TO_NCDHW, TO_NDHWC = (0, 4, 1, 2, 3), (0, 2, 3, 4, 1)
IR_AXIS4 = (0, 2, 3, 1)    # TF axis -> IR axis of a 4-D tensor


class NotLowerable(Error):
    """This node cannot become IR layers in the form the model uses it."""


class Lowering:
    def __init__(self, graph):
        self.graph = graph

    # --- layout -------------------------------------------------------------------
    @staticmethod
    def nchw(data) -> bool:
        return bool(data.soft_get("nchw"))

    @staticmethod
    def tf_shape(data) -> np.ndarray:
        return np.asarray(data["tf_shape"], dtype=np.int64)

    def rank(self, data) -> int:
        return len(self.tf_shape(data))

    def ir_axis(self, data, axis: int) -> int:
        rank = self.rank(data)
        axis = int(axis) % rank if rank else 0
        return IR_AXIS4[axis] if self.nchw(data) else axis

    def ir_shape(self, data) -> np.ndarray:
        shape = self.tf_shape(data)
        return shape[list(TO_NCHW)] if self.nchw(data) else shape

    @staticmethod
    def ir_value(value, nchw: bool):
        value = np.asarray(value)
        return np.transpose(value, TO_NCHW) if nchw and value.ndim == 4 else value

    # --- rewiring -----------------------------------------------------------------
    @staticmethod
    def inputs(node) -> list:
        return node.data_inputs()

    def keep_inputs(self, node, *datas):
        """The node reads exactly these data nodes, on ports 0, 1, ... (constants that became
        attributes or blobs are dropped)."""
        graph = self.graph
        for u, _, key in list(graph.in_edges(node.id, keys=True)):
            graph.remove_edge(u, node.id, key)
        for port, data in enumerate(datas):
            graph.connect(data, node, inp=port)

    def add_blob(self, node, name: str, value):
        """(A transposed view stays a view: fusing or emission copies it once.)"""
        from core.graph.blobs import add_blob
        add_blob(node, name, np.asarray(value, dtype=np.float32))

    @staticmethod
    def retype(node, op_class, attrs: dict | None = None):
        op_class.update_node_stat(node, attrs or {})
        node["tf_class"] = None

    def new_op(self, name: str, op_class, attrs: dict | None = None):
        node = self.graph.add_op(name)
        op_class.update_node_stat(node, attrs or {})
        return node

    def tensor_of(self, op, name: str, tf_shape=None, nchw: bool = False):
        """A new data node for output 0 of `op`; with `tf_shape`, its TF shape and layout set (what the
        lowering of a later op reads of it)."""
        data = self.graph.add_data(name)
        if tf_shape is not None:
            data["tf_shape"], data["nchw"] = np.asarray(tf_shape, dtype=np.int64), nchw
        self.graph.connect(op, data, out=0)
        return data

    @staticmethod
    def _same_shape(new, old):
        """A tensor an element-wise layer adds has the TF shape and layout of its neighbour."""
        if "tf_shape" in old.attrs:
            new["tf_shape"] = old["tf_shape"]
            new["nchw"] = old.soft_get("nchw")

    def insert_after(self, node, name: str, op_class, attrs: dict | None = None, port: int = 0):
        """node -> new data -> new op -> node's old output data (consumers unchanged). The new op
        produces the TF node's tensor now, so it takes the node's name (users find outputs by it)
        and the node takes `name`. Except for a Permute, the new tensor has the shape of the
        output (element-wise layers)."""
        graph = self.graph
        out = node.out_node(port)
        graph.remove_edge(node.id, out.id)
        mid = graph.add_data(name)
        if op_class is not Permute:
            self._same_shape(mid, out)
        graph.connect(node, mid, out=port)
        op = self.new_op(name, op_class, attrs)
        op["name"], node["name"] = node.name, name
        graph.connect(mid, op, inp=0)
        graph.connect(op, out, out=0)
        return op

    def insert_before(self, node, port: int, name: str, op_class, attrs: dict | None = None):
        """input data -> new op -> new data -> node's input `port`. Except for a Permute, the new
        tensor has the shape of the input (element-wise layers)."""
        graph = self.graph
        src = node.in_node(port)
        for u, v, key, a in list(graph.in_edges(node.id, keys=True, data=True)):
            if u == src.id and a.get("in") == port:
                graph.remove_edge(u, v, key)
        op = self.new_op(name, op_class, attrs)
        graph.connect(src, op, inp=0)
        mid = graph.add_data(name)
        if op_class is not Permute:
            self._same_shape(mid, src)
        graph.connect(op, mid, out=0)
        graph.connect(mid, node, inp=port)
        return op

    def tf_order_before(self, node, port: int = 0):
        """A Permute to NHWC before input `port` when that input is an NCHW tensor."""
        if self.nchw(node.in_node(port)):
            self.insert_before(node, port, "{}/to_nhwc".format(node.name), Permute, {"order": list(TO_NHWC)})

    def unsupported(self, node, why: str) -> NotLowerable:
        return NotLowerable("{}: {}", describe(node), why)


# --- the pass -----------------------------------------------------------------------
def _fold_constant_ops(graph):
    for node in graph.op_nodes():
        if node.soft_get("tf_class") is None or node.soft_get("op") == "Parameter":
            continue
        outs = list(node.out_nodes().values())
        if outs and all(d.soft_get("value") is not None for d in outs):
            graph.remove_node(node.id)


def _lower_ops(graph, lw):
    problems = []
    for node in graph.topological_ops():
        cls = node.soft_get("tf_class")
        if cls is None:
            continue
        try:
            cls.lower(node, lw)
        except NotLowerable as exc:
            if graph.graph.get("offload_unsupported"):  # --offload_unsupported_operations_to_tf
                from core.front.tf.offload import offload_unlowerable
                offload_unlowerable(node, lw)
                continue
            problems.append(exc.message)
            continue
        if node.id in graph and node.soft_get("tf_class") is not None:
            raise Error("Internal error: lowering of {} left a TensorFlow op in the graph.", describe(node))
    if problems:
        raise Error("Part of the nodes was not translated to IR. Stopped. These nodes cannot be converted in the "
                    "form the model uses them:\n  {}\n Cut the model around them (--input/--output), offload them to "
                    "TensorFlow (--offload_unsupported_operations_to_tf) or replace them with an extension "
                    "(--extensions).",
                    "\n  ".join(problems), faq=23)


def _materialize_constants(graph, lw):
    """Constants read as tensors become Const layers (their values in IR layout)."""
    for data in graph.data_nodes():
        if data.soft_get("value") is None or graph.in_degree(data.id):
            continue
        readers = [a for _, _, a in graph.out_edges(data.id, data=True)]
        if not data.soft_get("is_output") and all("bin" in a for a in readers):
            continue
        value = np.asarray(data.value)
        if value.dtype.kind not in "fiub":
            raise Error("The constant '{}' of type {} is read as a tensor; the IR holds numbers only.",
                        data.name, value.dtype)
        const = lw.new_op(data.name, Const, {})
        lw.add_blob(const, "custom", lw.ir_value(value, lw.nchw(data)))
        # the value now lives in the Const layer's blob
        data.value = None
        graph.connect(const, data, out=0)


def _permute_after_input(graph, lw, param, order, name: str, attrs: dict, tf_layout: dict):
    """The input's readers read it through a Permute (`order`) now: a new tensor with `tf_layout` (its TensorFlow
    shape and layout attributes) between."""
    data = param.out_node(0)
    new = graph.add_data(param.name + name)
    new.attrs.update(tf_layout)
    for _, v, key, a in list(graph.out_edges(data.id, keys=True, data=True)):
        graph.remove_edge(data.id, v, key)
        graph.add_edge(new.id, v, **a)
    op = lw.new_op(param.name + "/to_" + name.lstrip("/"), Permute, {"order": list(order), **attrs})
    graph.connect(data, op, inp=0)
    graph.connect(op, new, out=0)


def _permute_before_output(graph, lw, data, order, name: str):
    """A model output's producer writes it through a Permute (`order`; it takes the producer's name, which users
    find the output by); the layers that also read the output keep reading the tensor before it, which is
    returned."""
    producer = data.producer()
    port = next(p for p, d in producer.out_nodes().items() if d.id == data.id)
    readers = list(graph.out_edges(data.id, keys=True, data=True))
    lw.insert_after(producer, producer.name + name, Permute, {"order": list(order)}, port=port)
    mid = producer.out_node(port)
    for _, v, key, a in readers:
        graph.remove_edge(data.id, v, key)
        graph.add_edge(mid.id, v, **a)
    return mid


def _volumes_channels_first(graph, lw):
    """The model's 5-D inputs and outputs NCDHW (the module doc, 4.): a Permute to NDHWC after each such input,
    one to NCDHW before each such output."""
    rank5 = lambda data: len(np.atleast_1d(data.soft_get("tf_shape", ()))) == 5  # noqa: E731
    for param in graph.op_nodes(op="Parameter"):
        data = param.out_node(0)
        if rank5(data):
            _permute_after_input(graph, lw, param, TO_NDHWC, "/ndhwc", {},
                                 {"tf_shape": data.tf_shape, "nchw": False})
            param.shape = np.asarray(param.shape, dtype=np.int64)[list(TO_NCDHW)]
            data.attrs.pop("tf_shape")  # (IR layout now: no TensorFlow shape to check it against)
    for data in list(graph.data_nodes()):
        # (an input that is an output too is NCDHW already: it has no TensorFlow shape left)
        if data.soft_get("is_output") and rank5(data) and graph.in_degree(data.id):
            mid = _permute_before_output(graph, lw, data, TO_NCDHW, "/ndhwc")
            mid.attrs.update({"tf_shape": data.tf_shape, "nchw": False})
            data.attrs.pop("tf_shape")


def _inputs_and_outputs(graph, lw, keep_nhwc: bool):
    if not keep_nhwc:
        _volumes_channels_first(graph, lw)
    else:  # (preprocessing.py refuses means and the like on a volume whose channels stay last)
        for param in graph.op_nodes(op="Parameter"):
            if len(np.atleast_1d(param.out_node(0).soft_get("tf_shape", ()))) == 5:
                param["channels_last"] = True
    for param in graph.op_nodes(op="Parameter"):
        data = param.out_node(0)
        if not lw.nchw(data):
            continue
        if keep_nhwc:
            data["nchw"] = False
            # (preprocessing.py puts --mean_values and the like after it, where channels are axis 1)
            _permute_after_input(graph, lw, param, TO_NCHW, "/nchw", {"input_to_nchw": True},
                                 {"tf_shape": data.tf_shape, "nchw": True})
        else:
            param.shape = np.asarray(param.shape, dtype=np.int64)[list(TO_NCHW)]
    if not keep_nhwc:
        return
    for data in graph.data_nodes():
        if data.soft_get("is_output") and lw.nchw(data) and graph.in_degree(data.id):
            _permute_before_output(graph, lw, data, TO_NHWC, "/nchw")
            data["nchw"] = False


def _check_shapes(graph, lw):
    for data in graph.data_nodes():
        if "tf_shape" not in data.attrs or data.shape is None or data.soft_get("value") is not None:
            continue
        expected = lw.ir_shape(data)
        if not np.array_equal(np.asarray(data.shape), expected):
            producer = data.producer()
            raise Error("Internal error: after lowering, tensor '{}' (from {}) has IR shape {}, but TensorFlow's "
                        "shape {} says {}.", data.name, producer.name if producer is not None else "a constant",
                        list(data.shape), list(lw.tf_shape(data)), list(expected))


def lower_to_ir(graph, keep_nhwc: bool = False):
    from core.middle.shape_infer import partial_infer
    lw = Lowering(graph)
    graph.graph["layout"] = "NCHW"
    for data in graph.data_nodes():
        # (the TF type too: a layer offloaded while lowering reads tensors of ops lowered before it)
        data["tf_dtype"] = tensor_dtype(data)
        if data.soft_get("shape") is not None:
            data["tf_shape"] = np.array(data.shape, dtype=np.int64)
            # an op a front replacer made with nchw_layout (the reference's attribute) has IR-layout outputs
            producer = data.producer()
            data["nchw"] = len(data.shape) == 4 and not (producer is not None and producer.soft_get("nchw_layout"))
    _fold_constant_ops(graph)
    _lower_ops(graph, lw)
    _materialize_constants(graph, lw)
    _inputs_and_outputs(graph, lw, keep_nhwc)
    for data in graph.data_nodes():  # IR inference recomputes every tensor's shape
        if data.soft_get("value") is None:
            data.shape = None
    partial_infer(graph)
    _check_shapes(graph, lw)


# --- reshaping and broadcasting in IR layout ------------------------------------------
def permute_is_noop(shape, order) -> bool:
    """True when permuting a tensor of `shape` by `order` keeps its memory order (only
    axes of size 1 move), so a Reshape alone does the job."""
    moved = [a for a in order if shape[a] != 1]
    return moved == sorted(moved)


def _reshape_class():
    from core.ops.shape_ops import Reshape
    return Reshape


def reshape_node(lw: Lowering, node, in_port: int = 0, out_port: int = 0):
    """Retypes `node` into an IR Reshape from input `in_port` to output `out_port`, both in
    TensorFlow's element order: Permutes to NHWC before it and to NCHW after it where a 4-D
    side is NCHW in the IR (and the Permute is not a no-op on that shape)."""
    src, out = node.in_node(in_port), node.out_node(out_port)
    lw.keep_inputs(node, src)
    before = lw.nchw(src) and not permute_is_noop(lw.ir_shape(src), TO_NHWC)
    after = lw.nchw(out) and not permute_is_noop(lw.tf_shape(out), TO_NCHW)
    target = lw.tf_shape(out) if after else lw.ir_shape(out)
    lw.retype(node, _reshape_class(), {"dim": [int(d) for d in target]})
    if before:
        lw.insert_before(node, 0, "{}/to_nhwc".format(node.name), Permute, {"order": list(TO_NHWC)})
    if after:
        lw.insert_after(node, "{}/to_nchw".format(node.name), Permute, {"order": list(TO_NCHW)}, out_port)


def apply_op(lw: Lowering, data, name: str, op_class, attrs: dict, tf_shape=None, nchw: bool = False):
    """data -> a new op -> a new data node (returned; Lowering.tensor_of: `tf_shape` and `nchw`)."""
    op = lw.new_op(name, op_class, attrs)
    lw.graph.connect(data, op, inp=0)
    return lw.tensor_of(op, name, tf_shape, nchw)


def reshaped(lw: Lowering, src, tf_shape, nchw: bool, name: str):
    """A new tensor with TF shape `tf_shape` (TensorFlow's element order of `src`), stored
    NCHW when `nchw` (both set on it)."""
    cur = src
    if lw.nchw(src) and not permute_is_noop(lw.ir_shape(src), TO_NHWC):
        cur = apply_op(lw, cur, name + "/to_nhwc", Permute, {"order": list(TO_NHWC)})
    tf_shape = np.asarray(tf_shape, dtype=np.int64)
    after = nchw and not permute_is_noop(tf_shape, TO_NCHW)
    target = tf_shape if after or not nchw else tf_shape[list(TO_NCHW)]
    shaped = {"tf_shape": tf_shape, "nchw": nchw}
    if after:
        cur = apply_op(lw, cur, name + "/reshape", _reshape_class(), {"dim": [int(d) for d in target]})
        return apply_op(lw, cur, name + "/to_nchw", Permute, {"order": list(TO_NCHW)}, **shaped)
    return apply_op(lw, cur, name + "/reshape", _reshape_class(), {"dim": [int(d) for d in target]}, **shaped)


def broadcast_to(lw: Lowering, src, tf_shape, name: str):
    """`src` broadcast (TensorFlow/numpy rules) to `tf_shape`: a Reshape to the full rank
    where needed, then IR Tile layers along the axes it repeats."""
    from core.ops.shape_ops import Tile
    tf_shape = np.asarray(tf_shape, dtype=np.int64)
    rank = len(tf_shape)
    nchw = rank == 4
    shape = lw.tf_shape(src)
    aligned = np.concatenate([np.ones(rank - len(shape), np.int64), shape])
    cur = src
    if len(shape) != rank:
        cur = reshaped(lw, src, aligned, nchw, name)
    ir_have = aligned[list(TO_NCHW)] if nchw else aligned
    ir_want = tf_shape[list(TO_NCHW)] if nchw else tf_shape
    for axis in range(rank):
        if ir_have[axis] == 1 and ir_want[axis] > 1:
            cur = apply_op(lw, cur, "{}/tile{}".format(name, axis), Tile, {"axis": axis, "tiles": int(ir_want[axis])})
    return cur


class Composer:
    """Layers over one TF node's output shape (4-D: NCHW in the IR), built as a graph; `finish` makes the node
    itself the last one."""

    def __init__(self, node, lw):
        self.node, self.lw = node, lw
        self.shape = lw.tf_shape(node.out_node(0))
        self.nchw = len(self.shape) == 4

    def full(self, data, tag: str):
        """A TF input at the output's shape: a constant as a Const layer, a tensor broadcast where it must be."""
        value = data.soft_get("value")
        if value is not None:
            return self.const(np.asarray(value, np.float32), tag)
        if np.array_equal(self.lw.tf_shape(data), self.shape):
            return data
        return broadcast_to(self.lw, data, self.shape, "{}/{}".format(self.node.name, tag))

    def const(self, value, tag: str):
        value = np.ascontiguousarray(np.broadcast_to(np.asarray(value, np.float32), self.shape))
        const = self.lw.graph.add_const("{}/{}".format(self.node.name, tag), value)
        const["tf_shape"], const["nchw"] = self.shape, self.nchw
        return const

    def op(self, tag: str, op_class, attrs: dict, *inputs):
        name = "{}/{}".format(self.node.name, tag)
        layer = self.lw.new_op(name, op_class, attrs)
        for port, data in enumerate(inputs):
            self.lw.graph.connect(data, layer, inp=port)
        return self.lw.tensor_of(layer, name, self.shape, self.nchw)

    def power(self, tag: str, x, power=1.0, scale=1.0, shift=0.0):
        return self.op(tag, Power, {"power": power, "scale": scale, "shift": shift}, x)

    def eltwise(self, tag: str, operation: str, a, b):
        return self.op(tag, Eltwise, {"operation": operation}, a, b)

    def finish(self, op_class, attrs: dict, *inputs):
        self.lw.keep_inputs(self.node, *inputs)
        self.lw.retype(self.node, op_class, attrs)
