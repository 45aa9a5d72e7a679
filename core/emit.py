"""Graph -> ir.Network: layers in topological order, blobs from `bin` edges.

Port numbering follows the reference's IR: input ports are the op's input
indices (blobs included), output ports continue after them, so a Convolution
with weights and biases has input 0 and output 3.
"""
from __future__ import annotations

import numpy as np

from core.errors import Error
from core.graph.graph import output_names
from core.ops.op import SchemaAttrs
from ir import Edge, IRError, Layer, Network, Port
from ir.attrs import fmt_value
from ir.schema import layer_schema

# Internal ops that must be gone before emission.
_INTERNAL = {"Identity", "Silence", "Mul", "Add", "BatchNormalization", "ReverseChannels"}


def _data_attrs(node, warnings: list) -> dict[str, str]:
    items = node.soft_get("backend_attrs") or []
    values = {}
    for item in items:
        name, getter = item if isinstance(item, tuple) else (item, None)
        value = getter(node) if getter is not None else node.soft_get(name)
        if value is not None:
            values[name] = value
    if isinstance(items, SchemaAttrs):
        # built-in ops write through the schema the kernels read with
        try:
            return layer_schema(items.ir_type).write(values)
        except IRError as err:
            raise Error("Layer '{}' ({}): {}", node.name, node.soft_get("type"), err.message) from None
    data = {}
    for name, value in values.items():
        try:
            data[name] = value if isinstance(value, str) else fmt_value(value)
        except IRError as err:
            raise Error("Layer '{}' ({}), attribute '{}': {}", node.name, node.soft_get("type"), name,
                        err.message) from None
    schema = layer_schema(node.soft_get("type"))
    if schema is not None and node.soft_get("op_class") is not None:
        # an extension op with a built-in IR type: the kernels read it by the schema
        for problem in schema.check(data):
            warnings.append("Layer '{}' ({}) written by an extension op: {}; the inference kernels may not read "
                            "it as intended.".format(node.name, node.type, problem))
    return data


def to_network(graph, name: str, warnings: list | None = None) -> Network:
    warnings = [] if warnings is None else warnings
    ops = graph.topological_ops()
    ids = {node.id: i for i, node in enumerate(ops)}
    layers, edges = [], []
    out_port_of = {}  # data id -> (layer id, port id)
    for node in ops:
        if node.soft_get("op") in _INTERNAL:
            raise Error("Internal error: op '{}' ({}) reached IR emission.", node.name, node.op)
        in_edges = node.in_edges_data()
        n_in = len(in_edges)
        inputs, blobs = [], {}
        for src, attrs in in_edges:
            data = graph.node_obj(src)
            if "bin" in attrs:
                value = np.asarray(data.value)
                # float blobs are float32, or float16 after the precision pass
                blobs[attrs["bin"]] = np.ascontiguousarray(
                    value if value.dtype in (np.float16, np.float32) else value.astype(np.float32)).ravel()
            else:
                inputs.append(Port(attrs["in"], tuple(int(d) for d in data.shape)))
        outputs = []
        for port, data in sorted(node.out_nodes().items()):
            outputs.append(Port(n_in + port, tuple(int(d) for d in data.shape)))
            out_port_of[data.id] = (ids[node.id], n_in + port)
        layers.append(Layer(id=ids[node.id], name=node.name, type=node.type, precision=node.soft_get("precision") or "FP32",
                            data=_data_attrs(node, warnings), inputs=inputs, outputs=outputs, blobs=blobs))
    for node in ops:
        for src, attrs in node.in_edges_data():
            if "bin" in attrs:
                continue
            if src not in out_port_of:
                raise Error("Internal error: input {} of layer '{}' has no producer.", attrs["in"], node.name)
            from_layer, from_port = out_port_of[src]
            edges.append(Edge(from_layer, from_port, ids[node.id], attrs["in"]))
    params = [node for node in ops if node.soft_get("type") == "Input"]
    batch = int(params[0].out_node(0).shape[0]) if params and len(params[0].out_node(0).shape) else 1
    # model outputs that layers also read: said in <results> (the unread ones are outputs anyway)
    read = {(e.from_layer, e.from_port) for e in edges}
    results = [out_port_of[data_id] for data_id in out_port_of
               if graph.nodes[data_id].get("is_output") and out_port_of[data_id] in read]
    # the model's order of its outputs (is_output: 1, 2, ...), which IR v11's Results keep
    places = sorted((int(graph.nodes[d]["is_output"]), i, port) for i, (d, port) in enumerate(out_port_of.items())
                    if graph.nodes[d].get("is_output"))
    names = {port: output_names(graph.node_obj(d)) for d, port in out_port_of.items()
             if graph.nodes[d].get("is_output")}
    return Network(name=name, layers=layers, edges=edges, batch=batch, results=sorted(results),
                   output_order=[port for *_, port in places], output_names={k: v for k, v in names.items() if v})
