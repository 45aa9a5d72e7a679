"""Pieces of a TensorFlow graph, as GraphDefs the TF worker runs.

`TFSubgraph` is what a node of the converter's graph holds when it stands for
several original TensorFlow nodes (an offloaded sub-graph, a sub-graph a
replacer merged into an op without a shape function): their NodeDefs as the
model has them, the outside tensors they read (the node's input ports, in
order) and the tensors they produce for the rest of the graph (its output
ports, in order), each as (node name, port).

`GraphDefBuilder` assembles a new GraphDef (our own schema, no TensorFlow)
from such pieces: NodeDefs copied with their inputs rewired to the tensors the
builder provides (control inputs dropped, as the converter drops them, but those
between two nodes of one sub-graph; a constant that had one to a node left out
gets one to the node that feeds its reader instead: in a lowered while loop that
is what puts the constant in the loop's frame, where TensorFlow needs it), new
Placeholders, Consts holding values the converter knows, Transposes and Casts.
The bytes it gives are what the worker imports.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.errors import Error
from core.front.tf.builder import parse_input
from core.front.tf.tensors import numpy_dtype

# numpy dtype -> TensorFlow DataType enum
TF_DTYPES = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.int32): 3, np.dtype(np.uint8): 4,
             np.dtype(np.int16): 5, np.dtype(np.int8): 6, np.dtype(np.int64): 9, np.dtype(np.bool_): 10,
             np.dtype(np.uint16): 17, np.dtype(np.float16): 19, np.dtype(np.uint32): 22, np.dtype(np.uint64): 23}
DT_FLOAT = 1
# attributes that give the type of an op's output, in the order they are looked for
_OUTPUT_TYPE_ATTRS = ("DstT", "out_type", "output_type", "dtype", "T", "Tout", "Tparams")
# ops whose output is bool whatever their T
_BOOL_OUTPUTS = {"Greater", "GreaterEqual", "Less", "LessEqual", "Equal", "NotEqual", "LogicalAnd", "LogicalOr",
                 "LogicalNot", "IsNan", "IsInf", "IsFinite", "InTopK", "InTopKV2", "All", "Any", "ApproximateEqual"}


def set_const(node, value: np.ndarray) -> None:
    """Makes `node` (a NodeDef) a Const holding `value` (its dtype one of TF_DTYPES)."""
    enum = TF_DTYPES[np.dtype(value.dtype)]
    node.op = "Const"
    node.attr["dtype"].type = enum
    tensor = node.attr["value"].tensor
    tensor.dtype = enum
    for d in value.shape:
        tensor.tensor_shape.dim.add(size=int(d))
    tensor.tensor_content = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes()


def tensor_ref(name: str, port: int) -> str:
    return name if port == 0 else "{}:{}".format(name, port)


def tensor_key(text: str) -> tuple[str, int]:
    name, port, _ = parse_input(text)
    return name, port


@dataclass
class TFSubgraph:
    nodes: list                                   # NodeDefs (the model's, untouched)
    inputs: list = field(default_factory=list)    # [(node name, port)] read from outside, = input ports
    outputs: list = field(default_factory=list)   # [(node name, port)] given to the rest, = output ports

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]


def node_source(node):
    """What TensorFlow nodes a converter node stands for: a TFSubgraph, a one-node
    TFSubgraph of its own NodeDef, or None (an op the converter made, a Parameter)."""
    sub = node.soft_get("tf_subgraph")
    if sub is not None:
        return sub
    pb = node.soft_get("pb")
    if pb is None or node.soft_get("op") == "Parameter" or not hasattr(pb, "attr") or not hasattr(pb, "input"):
        return None
    inputs = [tensor_key(text) for text in pb.input if not text.startswith("^")]
    return TFSubgraph([pb], inputs, [(pb.name, port) for port in sorted(node.out_nodes())])


def output_dtype(pb, port: int = 0):
    """The numpy dtype of a NodeDef's output as its op and attributes say (None if they do not)."""
    if pb.op in _BOOL_OUTPUTS:
        return np.dtype(np.bool_)
    for name in _OUTPUT_TYPE_ATTRS:
        if name in pb.attr:
            value = pb.attr[name]
            case = value.WhichOneof("value")
            if case == "type":
                return np.dtype(numpy_dtype(value.type, "node '{}'".format(pb.name)))
            if case == "list" and len(value.list.type) > port:
                return np.dtype(numpy_dtype(value.list.type[port], "node '{}'".format(pb.name)))
    return None


def _frame_anchors(sub: TFSubgraph, inside: set) -> dict:
    """{constant: a node of the sub-graph to depend on} for each Const whose control inputs all name
    nodes outside it: the node that feeds the constant's first reader (another input of it)."""
    lost = {pb.name for pb in sub.nodes if pb.op == "Const" and pb.input
            and not any(t.startswith("^") and t[1:] in inside for t in pb.input)}
    anchors = {}
    for pb in sub.nodes if lost else ():
        data = [tensor_key(t)[0] for t in pb.input if not t.startswith("^")]
        feeds = [name for name in data if name in inside and name not in lost]
        for name in data:
            if name in lost and feeds and name not in anchors:
                anchors[name] = feeds[0]
    return anchors


def port_of(producer, data) -> int:
    """The output port of `producer` that makes the tensor `data` (0 if none does)."""
    for port, out in producer.out_nodes().items():
        if out.id == data.id:
            return port
    return 0


def tensor_dtype(data):
    """The numpy dtype of a tensor that TensorFlow nodes compute: what TensorFlow said of its producer,
    its NodeDef's output type, or that of the node of its sub-graph computing it, or the type recorded before
    its producer was lowered; else None."""
    if data.soft_get("tf_dtype") is not None:
        return data.tf_dtype
    node = data.producer()
    if node is None:
        return None
    port = port_of(node, data)
    known = node.soft_get("tf_output_dtypes")
    if known and port < len(known):
        return np.dtype(known[port])
    sub = node.soft_get("tf_subgraph")
    if sub is not None:
        name, tf_port = sub.outputs[port]
        pb = next((n for n in sub.nodes if n.name == name), None)
        return None if pb is None else output_dtype(pb, tf_port)
    pb = node.soft_get("pb")
    return output_dtype(pb, port) if pb is not None and hasattr(pb, "attr") else None


class GraphDefBuilder:
    def __init__(self, graph=None):
        from core.front.tf.loader import tf_pb2
        self.pb2 = tf_pb2()
        self.graph_def = self.pb2.GraphDef()
        source = graph.graph.get("tf_graph_def") if graph is not None else None
        self._source = source
        if source is not None and source.HasField("versions"):
            self.graph_def.versions.CopyFrom(source.versions)
        self._names: set[str] = set()
        self._library_needed = False

    # --- names ------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        name, i = base, 0
        while name in self._names:
            i += 1
            name = "{}_{}".format(base, i)
        self._names.add(name)
        return name

    def reserve(self, names):
        self._names.update(names)

    def has(self, name: str) -> bool:
        return name in self._names

    # --- nodes ------------------------------------------------------------------------
    def add_subgraph(self, sub: TFSubgraph, refs: list[str]):
        """The sub-graph's NodeDefs, its i-th outside input read from tensor refs[i]."""
        if len(refs) != len(sub.inputs):
            raise Error("Internal error: {} tensors for the {} inputs of a TensorFlow sub-graph.", len(refs),
                        len(sub.inputs))
        rewire = {key: ref for key, ref in zip(sub.inputs, refs)}
        inside = set(sub.names)
        anchors = _frame_anchors(sub, inside)
        for pb in sub.nodes:
            copy = self.graph_def.node.add()
            copy.CopyFrom(pb)
            copy.device = ""
            del copy.input[:]
            controls = [text for text in pb.input if text.startswith("^") and text[1:] in inside]
            if pb.name in anchors and not controls:
                controls = ["^" + anchors[pb.name]]
            for text in pb.input:
                if text.startswith("^"):
                    continue
                key = tensor_key(text)
                copy.input.append(rewire.get(key, tensor_ref(*key)))
            copy.input.extend(controls)
            if any(v.WhichOneof("value") == "func" or (v.WhichOneof("value") == "list" and len(v.list.func))
                   for v in pb.attr.values()):
                self._library_needed = True
            self._names.add(pb.name)

    def add_placeholder(self, base: str, shape, dtype=np.float32) -> str:
        name = self.fresh(base)
        node = self.graph_def.node.add(name=name, op="Placeholder")
        node.attr["dtype"].type = TF_DTYPES[np.dtype(dtype)]
        shape_proto = node.attr["shape"].shape
        if shape is None:
            shape_proto.unknown_rank = True
        else:
            for d in shape:
                shape_proto.dim.add(size=int(d))
        return name

    def add_const(self, base: str, value, dtype=None) -> str:
        value = np.asarray(value)
        dtype = np.dtype(dtype or (np.float32 if value.dtype == np.float64 else value.dtype))
        if dtype not in TF_DTYPES:
            raise Error("The constant '{}' of type {} cannot go into a TensorFlow graph.", base, value.dtype)
        name = self.fresh(base)
        set_const(self.graph_def.node.add(name=name), value.astype(dtype))
        return name

    def add_op(self, base: str, op: str, inputs: list[str], **attrs) -> str:
        name = self.fresh(base)
        node = self.graph_def.node.add(name=name, op=op)
        node.input.extend(inputs)
        for key, value in attrs.items():
            if key.startswith("type_"):
                node.attr[key[5:]].type = value
            else:
                raise ValueError(key)
        return name

    def transpose(self, base: str, ref: str, perm, dtype=DT_FLOAT) -> str:
        perm_name = self.add_const(base + "/perm", np.array(perm, dtype=np.int32))
        return self.add_op(base, "Transpose", [ref, perm_name], type_T=dtype, type_Tperm=3)

    def cast(self, base: str, ref: str, src: int, dst: int) -> str:
        return self.add_op(base, "Cast", [ref], type_SrcT=src, type_DstT=dst)

    # --- result -----------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        if self._library_needed and self._source is not None and self._source.HasField("library"):
            self.graph_def.library.CopyFrom(self._source.library)
        return self.graph_def.SerializeToString()
