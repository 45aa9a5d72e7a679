"""Linear operation fusing, stages 2 and 3 of the reference guide (stage 1,
decomposing BatchNorm/ScaleShift into Mul -> Add, is core/middle/linear_lowering.py):

2. merge: chains of Mul and Add become a single Mul -> Add;
3. fuse: Mul/Add go into the Convolution/FullyConnected before them (backward),
   else Mul into the ones after them (forward). Add is fused forward only where
   the convolution has no padding (the reference never fuses Add forward: padded
   borders would get the shift where the input had zeros);
then leftovers become ScaleShift layers.
"""
import numpy as np

from core.graph.blobs import get_blob, per_channel, set_blob
from core.ops.convolution import pad_end
from core.ops.linear import ScaleShift

FUSABLE = ("Convolution", "FullyConnected")


def _channels(node):
    shape = node.in_node(0).shape
    return int(shape[1]) if len(shape) > 1 else int(shape[0]) if len(shape) else 1


def _vec(node, name):
    return per_channel(get_blob(node, name), _channels(node))


def _only_consumer(data):
    consumers = data.consumers()
    if len(consumers) == 1 and not data.soft_get("is_output"):
        return consumers[0]
    return None


def _bypass(node):
    graph = node.graph
    graph.remove_nodes_from([d.id for _, d, _ in node.blob_inputs()])
    graph.bypass(node)


# --- stage 2 -------------------------------------------------------------------
def merge_linear(graph):
    changed = True
    while changed:
        changed = False
        for a in graph.op_nodes():
            if a.id not in graph or a.op not in ("Mul", "Add"):
                continue
            b = _only_consumer(a.out_node(0))
            if b is None or b.soft_get("op") not in ("Mul", "Add"):
                continue
            if a.op == "Mul" and b.op == "Mul":
                set_blob(b, "weights", _vec(a, "weights") * _vec(b, "weights"))
            elif a.op == "Add" and b.op == "Add":
                set_blob(b, "biases", _vec(a, "biases") + _vec(b, "biases"))
            elif a.op == "Add" and b.op == "Mul":
                # (x + s) * m == x * m + s * m: turn the pair into Mul -> Add
                s, m = _vec(a, "biases"), _vec(b, "weights")
                _retype(a, "Mul", "weights", m, "biases")
                _retype(b, "Add", "biases", s * m, "weights")
                changed = True
                continue
            else:
                continue
            _bypass(a)
            changed = True


def _retype(node, op, blob, value, old_blob):
    node.graph.remove_nodes_from([d.id for n, d, _ in node.blob_inputs() if n == old_blob])
    node["op"] = op
    set_blob(node, blob, value)


# --- stage 3 -------------------------------------------------------------------
def _weights_view(conv):
    """Weights as (groups, out per group, in per group, rest) for Convolution, (O, I) for FC."""
    w = get_blob(conv, "weights")
    if conv.op == "Convolution":
        g = int(conv.group)
        out_c = int(conv.output)
        in_c = int(conv.in_node(0).shape[1])
        return w.reshape(g, out_c // g, in_c // g, -1)
    return w.reshape(int(conv["out-size"]), -1)


def _out_channels(conv):
    return int(conv.output) if conv.op == "Convolution" else int(conv["out-size"])


def fuse_backward(graph):
    while _fuse_backward_once(graph):
        pass


def _fuse_backward_once(graph) -> bool:
    changed = False
    for node in graph.op_nodes():
        if node.id not in graph or node.op not in ("Mul", "Add"):
            continue
        producer = node.in_node(0).producer()
        if producer is None or producer.soft_get("op") not in FUSABLE or _only_consumer(node.in_node(0)) is None:
            continue
        n_out = _out_channels(producer)
        bias = get_blob(producer, "biases")
        bias = np.zeros(n_out, np.float32) if bias is None else bias.astype(np.float32)
        if node.op == "Mul":
            m = _vec(node, "weights")
            w = get_blob(producer, "weights").reshape(n_out, -1) * m[:, None]
            set_blob(producer, "weights", w.ravel())
            set_blob(producer, "biases", bias * m)
        else:
            set_blob(producer, "biases", bias + _vec(node, "biases"))
        if node.out_node(0).soft_get("is_output"):
            # the network's output keeps the name users know it by (the BN/Scale layer's)
            producer["name"] = node.soft_get("fused_from") or node.name
        _bypass(node)
        changed = True
    return changed


def _forward_targets(node):
    data = node.out_node(0)
    consumers = data.consumers()
    if data.soft_get("is_output") or not consumers:
        return None
    for c in consumers:
        if c.soft_get("op") not in FUSABLE or c.in_node(0).id != data.id:
            return None
        if c.op == "FullyConnected" and int(c.axis) != 1:
            return None
        if node.op == "Add" and c.op == "Convolution" and (np.any(np.asarray(c.pad) != 0) or np.any(pad_end(c) != 0)):
            return None
    return consumers


def fuse_forward(graph):
    while _fuse_forward_once(graph):
        pass


def _fuse_forward_once(graph) -> bool:
    changed = False
    for node in graph.op_nodes():
        if node.id not in graph or node.op not in ("Mul", "Add"):
            continue
        targets = _forward_targets(node)
        if targets is None:
            continue
        channels = _channels(node)
        for conv in targets:
            w = _weights_view(conv)
            if conv.op == "Convolution":
                g, _, cpg, _ = w.shape
                per_in = lambda v: v.reshape(g, 1, cpg, 1)  # noqa: E731
            else:
                per_in = lambda v: np.repeat(v, w.shape[1] // channels)[None, :]  # noqa: E731
            if node.op == "Mul":
                set_blob(conv, "weights", (w * per_in(_vec(node, "weights"))).ravel())
            else:
                n_out = _out_channels(conv)
                bias = get_blob(conv, "biases")
                bias = np.zeros(n_out, np.float32) if bias is None else bias
                shift = (w * per_in(_vec(node, "biases"))).reshape(n_out, -1).sum(axis=1)
                set_blob(conv, "biases", bias + shift.astype(np.float32))
        _bypass(node)
        changed = True
    return changed


# --- leftovers -------------------------------------------------------------------
def linear_to_scale_shift(graph):
    """Remaining Mul -> Add pairs (and lone Mul or Add) become ScaleShift layers."""
    for node in graph.op_nodes():
        if node.id not in graph or node.op not in ("Mul", "Add"):
            continue
        c = _channels(node)
        if node.op == "Mul":
            w = _vec(node, "weights")
            nxt = _only_consumer(node.out_node(0))
            if nxt is not None and nxt.soft_get("op") == "Add":
                b = _vec(nxt, "biases")
                _bypass(node)
                _to_scale_shift(nxt, w, b)
            else:
                _to_scale_shift(node, w, np.zeros(c, np.float32))
        else:
            _to_scale_shift(node, np.ones(c, np.float32), _vec(node, "biases"))


def _to_scale_shift(node, w, b):
    node.graph.remove_nodes_from([d.id for _, d, _ in node.blob_inputs()])
    ScaleShift.update_node_stat(node, {})
    set_blob(node, "weights", w)
    set_blob(node, "biases", b)


def fuse_linear_ops(graph):
    merge_linear(graph)
    fuse_backward(graph)
    merge_linear(graph)
    fuse_forward(graph)
