"""Op: the base of every operation, with the reference guide's extension API.

An Op subclass names its operation (`op`), its IR layer type (`type` in the
mandatory props), the attributes it accepts (`supported_attrs`), how they are
written to the IR (`backend_attrs`: names or `(name, lambda node: str)` tuples)
and a shape function (`infer`). Defining a subclass registers it; a later class
with the same `op` (a user extension) replaces the earlier one.
"""
from __future__ import annotations

import numpy as np

from core.graph.graph import Graph, Node
from ir.schema import layer_schema


class Op:
    registered_ops: dict[str, type["Op"]] = {}
    op: str | None = None
    enabled = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("op") is not None and cls.enabled:
            Op.registered_ops[cls.op] = cls

    def __init__(self, graph: Graph, attrs1: dict | None = None, attrs2: dict | None = None):
        self.graph = graph
        self.attrs = {"kind": "op"}
        for attrs in (attrs1, attrs2):
            if attrs:
                self.attrs.update(attrs)

    # --- the extension API ----------------------------------------------------
    def supported_attrs(self) -> list:
        return []

    def backend_attrs(self) -> list:
        return self.supported_attrs()

    @classmethod
    def get_op_class_by_name(cls, name: str) -> type["Op"]:
        return cls.registered_ops[name]

    @classmethod
    def update_node_stat(cls, node: Node, attrs: dict | None = None):
        """Turns an extracted node into this op: mandatory props, then attrs.

        The class registered for the op now is the one used, so a user op that
        replaces a built-in one takes effect in the built-in extractors too."""
        target = Op.registered_ops.get(cls.op, cls) if cls.op else cls
        op = target(node.graph, attrs or {})
        node.attrs.update(op.attrs)
        node["backend_attrs"] = op.backend_attrs()
        node["op_class"] = target

    # --- building new nodes (front replacements, core/front/replacement) -----------
    def add_node(self, attrs: dict | None = None) -> Node:
        """A new op node of this operation (no edges): the op's attributes, then `attrs`.
        Its name is `attrs["name"]` (or the op name) made unique among the graph's nodes."""
        new_attrs = dict(self.attrs)
        new_attrs.update(attrs or {})
        new_attrs.pop("kind", None)
        name = str(new_attrs.pop("name", None) or self.attrs.get("op") or type(self).__name__)
        names = {a.get("name") for _, a in self.graph.nodes(data=True)}
        if name in names or name in self.graph:
            name = self.graph.unique_id(name)
        node = self.graph.add_op(name, **new_attrs)
        node["backend_attrs"] = self.backend_attrs()
        node["op_class"] = type(self)
        return node

    def create_node(self, inputs: list | None = None, attrs: dict | None = None, edge_attrs: dict | None = None) -> Node:
        """add_node, then input i is connected from inputs[i]: a Node (its output port 0)
        or a (Node, output port) tuple. Front phase only: the graph's edges join op nodes."""
        if not self.graph.graph.get("front_view"):
            from core.errors import Error
            raise Error("Op.create_node connects op nodes directly: it works during front replacements "
                        "(FrontReplacementOp/Subgraph), before shape inference creates data nodes.")
        node = self.add_node(attrs)
        for port, item in enumerate(inputs or []):
            src, out = item if isinstance(item, tuple) else (item, 0)
            self.graph.add_edge(src.id, node.id, **{"out": out, "in": port}, **(edge_attrs or {}))
        return node



class SchemaAttrs(list):
    """backend_attrs derived from the IR schema (ir/schema): (schema attribute name,
    getter) pairs that the emitter writes with `LayerSchema.write`, so every name,
    kind and range is checked against the one declaration the kernels read."""

    def __init__(self, ir_type: str, items):
        super().__init__(items)
        self.ir_type = ir_type


def ir_attrs(ir_type: str, **getters) -> SchemaAttrs:
    """backend_attrs of a built-in op: every attribute the schema declares for
    `ir_type`, taken from the node attribute of the same name unless `getters`
    gives a function for it (a getter returning None leaves the attribute out)."""
    schema = layer_schema(ir_type)
    if schema is None:
        raise KeyError(f"IR type {ir_type!r} has no schema in ir/schema")
    unknown = set(getters) - set(schema.attrs)
    if unknown:
        raise KeyError(f"IR type {ir_type!r} has no attribute(s) {sorted(unknown)} in ir/schema")
    return SchemaAttrs(ir_type, [(name, getters.get(name) or _node_attr(name)) for name in schema.attrs])


def check_ranges(node, ir_type: str, names):
    """The node's values of these schema attributes are of the right kind and range
    (e.g. stride >= 1): checked before shapes are computed with them, so that a
    model's stride 0 is an error naming the layer, not a division by zero."""
    from core.errors import ShapeError
    from ir import IRError
    schema = layer_schema(ir_type)
    for name in names:
        value = node.soft_get(name)
        if value is None:
            continue
        try:
            schema.attrs[name].validate(value)
        except IRError as err:
            raise ShapeError("{} '{}': {}. Fix the layer's parameters in the model.", node.soft_get("op", ir_type),
                             node.name, err.message) from None


def _node_attr(name):
    return lambda node: node.soft_get(name)


def feature_axis(node: Node) -> int:
    """The channel axis of the node's tensors: 1 in IR layout (NCHW), the last one
    while a TensorFlow graph is still in its own layout (graph.graph["layout"] is
    "NHWC" until lowering), so IR ops that a front replacer puts in a TF graph
    check their channels right in both phases."""
    return -1 if node.graph.graph.get("layout") == "NHWC" else 1


def copy_shape_infer(node: Node):
    """Output shape equals input shape (activations, normalizations): one output, so a
    read of another port (a replacer's wrong port) is an error, not a silent copy."""
    outs = node.out_nodes()
    extra = sorted(port for port in outs if port != 0)
    if extra:
        from core.errors import Error
        raise Error("Layer '{}' ({}) has one output, but its output port {} is read by other nodes: a replacer or "
                    "extension connected a port the operation does not have.", node.soft_get("name"),
                    node.soft_get("op"), extra[0])
    if 0 in outs:
        outs[0].shape = np.array(node.in_node(0).shape, dtype=np.int64)
