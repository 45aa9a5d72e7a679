"""Lowering of BatchNormalization and ScaleShift to per-channel linear ops.

BatchNormalization -> linear ops with precomputed per-channel factors:
y = (x - mean) / sqrt(var + eps) = x * w + b with w = 1/sqrt(var+eps), b = -mean*w.
With fusing on it becomes Mul -> Add (stage 1 of the reference's linear fusing);
with --disable_fusing a single ScaleShift.
"""
import numpy as np

from core.graph.blobs import add_blob, get_blob, per_channel
from core.ops.linear import Add, Mul, ScaleShift


def _factors(node):
    mean = get_blob(node, "mean").astype(np.float64)
    var = get_blob(node, "variance").astype(np.float64)
    w = 1.0 / np.sqrt(var + float(node.epsilon))
    return w.astype(np.float32), (-mean * w).astype(np.float32)


def replace_with_linear(node, w, b, split: bool):
    """Replaces a one-in/one-out op by ScaleShift(w, b), or Mul(w) -> Add(b) when split."""
    graph = node.graph
    src = node.in_node(0)
    out = node.out_node(0)
    name = node.name
    graph.remove_nodes_from([d.id for _, d, _ in node.blob_inputs()] + [node.id])
    if not split:
        ss = graph.add_op(name)
        ScaleShift.update_node_stat(ss, {})
        _wire(graph, src, ss, out, [("weights", w), ("biases", b)])
        return
    mid = graph.add_data(name + "/mul")
    mid.shape = src.shape
    mul = graph.add_op(name + "/mul")
    Mul.update_node_stat(mul, {"fused_from": name})
    _wire(graph, src, mul, mid, [("weights", w)])
    add = graph.add_op(name)
    Add.update_node_stat(add, {"fused_from": name})
    _wire(graph, mid, add, out, [("biases", b)])


def _wire(graph, src, op, out, blobs):
    graph.connect(src, op, inp=0)
    for bname, value in blobs:
        add_blob(op, bname, value)
    graph.connect(op, out, out=0)


def lower_batch_norm(graph, fusing: bool):
    for node in graph.op_nodes(op="BatchNormalization"):
        w, b = _factors(node)
        replace_with_linear(node, w, b, split=fusing)


def decompose_scale_shift(graph):
    """Stage 1 for ScaleShift: Mul -> Add, so the merge/fuse stages see one kind of op."""
    for node in graph.op_nodes(op="ScaleShift"):
        c = int(node.in_node(0).shape[1]) if len(node.in_node(0).shape) > 1 else int(node.in_node(0).shape[0])
        w = per_channel(get_blob(node, "weights"), c)
        b = get_blob(node, "biases")
        b = np.zeros(c, np.float32) if b is None else per_channel(b, c)
        replace_with_linear(node, w, b, split=True)
