"""Graph -> ir.Network: layers in topological order, blobs from `bin` edges.

Port numbering follows the reference's IR: input ports are the op's input
indices (blobs included), output ports continue after them, so a Convolution
with weights and biases has input 0 and output 3.
"""
from __future__ import annotations

import numpy as np

from core.errors import Error
from ir import Edge, Layer, Network, Port
from ir.attrs import fmt_value

# Internal ops that must be gone before emission.
_INTERNAL = {"Identity", "Silence", "Mul", "Add", "BatchNormalization", "ReverseChannels"}


def _data_attrs(node) -> dict[str, str]:
    result = {}
    for item in node.soft_get("backend_attrs") or []:
        if isinstance(item, tuple):
            name, getter = item
            value = getter(node)
        else:
            name = item
            value = node.soft_get(item)
        if value is None:
            continue
        result[name] = value if isinstance(value, str) else fmt_value(value)
    return result


def to_network(graph, name: str) -> Network:
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
                blobs[attrs["bin"]] = np.ascontiguousarray(data.value, dtype=np.float32).ravel()
            else:
                inputs.append(Port(attrs["in"], tuple(int(d) for d in data.shape)))
        outputs = []
        for port, data in sorted(node.out_nodes().items()):
            outputs.append(Port(n_in + port, tuple(int(d) for d in data.shape)))
            out_port_of[data.id] = (ids[node.id], n_in + port)
        layers.append(Layer(id=ids[node.id], name=node.name, type=node.type, precision="FP32",
                            data=_data_attrs(node), inputs=inputs, outputs=outputs, blobs=blobs))
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
    return Network(name=name, layers=layers, edges=edges, batch=batch)
