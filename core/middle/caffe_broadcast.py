"""Caffe's Scale and Bias with a second input broadcast it over the first from
`axis` (an SE block's [N, C] scale over [N, C, H, W] with axis 0). The IR's Eltwise
takes inputs of one shape, so the second input is reshaped to the first's rank
([N, C, 1, 1]) and tiled over the other axes, one Tile per axis."""
from __future__ import annotations

import numpy as np

from core.ops.shape_ops import Reshape, Tile


def expand_axis_broadcasts(graph) -> None:
    for node in list(graph.op_nodes(op="Eltwise")):
        axis = node.soft_get("caffe_axis")
        if axis is None:
            continue
        shape = [int(d) for d in node.in_node(0).shape]
        part = [int(d) for d in node.in_node(1).shape]
        if shape == part:
            continue
        aligned = [1] * axis + part + [1] * (len(shape) - axis - len(part))
        _insert_before(graph, node, 1, Reshape, {"dim": np.array(aligned, dtype=np.int64)}, aligned,
                       node.name + "/broadcast")
        now = list(aligned)
        for i, want in enumerate(shape):  # (each Tile goes between the one before and the Eltwise)
            if now[i] != want:
                now[i] = want
                _insert_before(graph, node, 1, Tile, {"axis": i, "tiles": want}, list(now),
                               f"{node.name}/broadcast_tile{i}")


def _insert_before(graph, consumer, port: int, op_class, attrs: dict, out_shape: list, name: str) -> None:
    """An op between input `port` of `consumer` and the tensor it reads."""
    (data_id, edge_key, edge), = [(u, k, a) for u, _, k, a in graph.in_edges(consumer.id, keys=True, data=True)
                                  if a.get("in") == port]
    node = graph.add_op(name)
    op_class.update_node_stat(node, attrs)
    out = graph.add_data(name, shape=np.array(out_shape, dtype=np.int64))
    graph.connect(graph.node_obj(data_id), node, inp=0)
    graph.connect(node, out, out=0)
    graph.remove_edge(data_id, consumer.id, edge_key)
    graph.add_edge(out.id, consumer.id, **edge)
