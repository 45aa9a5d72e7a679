"""Layers that only move values (Reshape, Permute) made fewer, and the per-channel
arithmetic behind them folded into the layer that computes the tensor.

TensorFlow's dense layers on 3-D and 4-D tensors (Keras' EinsumDense, ConvNeXt's
pointwise convolutions, attention) write a MatMul between Reshapes and Transposes and
add the bias after them: lowered literally, each bias is a Const as big as the tensor
(or a ScaleShift) run per request, and the layout Permutes on both sides of an
activation cancel out but never meet. OpenVINO's transformations remove the same
things (bias fusion, transpose sinking).

1. `fold_linear`: a ScaleShift, or an Eltwise sum or product of a tensor and a Const layer (a
   batch normalization of a 5-D tensor), where the tensor comes from a FullyConnected,
   Convolution or Deconvolution through Reshapes and Permutes only,
   goes into the producer's weights and biases when its factors are one per output
   channel of the producer: which channel each value lands on is found by sending value
   ids through the moves between (as core/middle/shuffle_fold.py does).
2. `hoist_moves`: a Permute or Reshape moves up above the layers that compute each value
   alone (activations, Power, Clamp, a ScaleShift with one factor) and above a LayerNorm or
   SoftMax (a Permute renumbering their axis; a Reshape only where it keeps the last axis
   they normalize over) - where that brings it onto another move of its kind, or the
   normalized axis of a LayerNorm or SoftMax becomes the innermost one (oneDNN's fast
   kernels normalize over the last axis).
3. `compose_moves`: a Permute after a Permute is one Permute (none when the two cancel
   out), a Reshape after a Reshape one Reshape (also a Permute that moves only axes of
   size 1), a Reshape to the same shape nothing; two
   equal moves of one tensor are one (a 3-D layer's Permute to NCDHW before each reader of
   a tensor: core/front/tf/ops/volume.py), which can then go up and cancel.
Each tensor on the way must feed only the next layer and be no model output (a move that
makes a model output hands the output's name to the layer that computes it then).
"""
from __future__ import annotations

import numpy as np

from core.graph.blobs import get_blob, set_blob
from core.graph.graph import shape_tuple
from core.validate import forget_framework_tensor

MOVES = ("Reshape", "Permute")
PRODUCERS = ("FullyConnected", "Convolution", "Deconvolution")  # their output channel is axis 1
ELEMENTWISE = ("ReLU", "Activation", "Clamp", "Power")  # each output value from its input value alone
AXIS_OPS = ("LayerNorm", "SoftMax", "LogSoftmax")  # normalize over their `axis`
MAX_VALUES = 1 << 24  # ids traced per fold (a tensor of 16M values: far more than a bias needs)


def simplify_moves(graph, fuse: bool = True) -> None:
    """The three steps until none changes anything (fuse=False: no folding into producers)."""
    changed = True
    while changed:
        changed = bool(fuse and fold_linear(graph)) | bool(hoist_moves(graph)) | bool(compose_moves(graph))


def _sole_consumer(data):
    consumers = data.consumers()
    if len(consumers) == 1 and not data.soft_get("is_output"):
        return consumers[0]
    return None


# --- 1. per-channel arithmetic into the producer ----------------------------------------
def fold_linear(graph) -> int:
    """Folds every ScaleShift or Eltwise + Const it can (see the module doc); returns how many."""
    folded = 0
    for node in graph.op_nodes():
        if node.id in graph and node.soft_get("op") in ("Eltwise", "ScaleShift") and _fold(graph, node):
            folded += 1
    return folded


def _constant_value(data):
    """The value of a Const layer's output that only one layer reads, or None."""
    op = data.producer()
    if op is None or op.soft_get("op") != "Const" or len(data.consumers()) != 1:
        return None
    return get_blob(op, "custom")


def _tensor_port(node):
    """The input port of the tensor a ScaleShift, or an Eltwise sum (coefficient 1 for the tensor) or product of a
    tensor and a Const layer, computes on; None for any other node."""
    if node.op == "ScaleShift":
        return 0
    inputs = node.in_nodes()
    if node.soft_get("operation") not in ("sum", "mul") or sorted(inputs) != [0, 1]:
        return None
    coeff = (node.soft_get("coeff") if node.operation == "sum" else None) or [1.0, 1.0]
    for x, c in ((0, 1), (1, 0)):
        if _constant_value(inputs[c]) is not None and _constant_value(inputs[x]) is None and float(coeff[x]) == 1.0:
            return x
    return None


def _factors(node, port: int, shape: tuple):
    """(scale or None, shift) of x * scale + shift, both of x's `shape`; None when they do not broadcast to it."""
    try:
        if node.op == "Eltwise":
            const = node.in_node(1 - port)
            value = np.broadcast_to(np.asarray(_constant_value(const), np.float32).reshape(shape_tuple(const)), shape)
            if node.operation == "mul":
                return value, np.zeros(shape, np.float32)
            coeff = float((node.soft_get("coeff") or [1.0, 1.0])[1 - port])
            return None, value * np.float32(coeff)
        along = [1] * len(shape)
        along[1 if len(shape) > 1 else 0] = -1  # the ScaleShift's channel axis

        def full(value, default):
            if value is None or not np.size(value):
                return np.full(shape, default, np.float32)
            value = np.asarray(value, np.float32).ravel()
            return np.broadcast_to(value.reshape(along) if value.size > 1 else value[0], shape)
        return full(get_blob(node, "weights"), 1.0), full(get_blob(node, "biases"), 0.0)
    except ValueError:
        return None


def _chain_to_producer(data):
    """(producer, the moves from it to `data` in order) for a PRODUCERS layer whose output reaches
    `data` through moves alone, each tensor read by the next layer only; or None."""
    moves = []
    while True:
        op = data.producer()
        if op is None:
            return None
        if op.soft_get("type") in PRODUCERS:
            return (op, moves[::-1]) if _sole_consumer(data) is not None else None
        if op.soft_get("op") not in MOVES or _sole_consumer(data) is None:
            return None
        moves.append(op)
        data = op.in_node(0)


def _per_channel(values: np.ndarray, channels: np.ndarray, count: int):
    """One value per channel when `values` holds the same one wherever a channel's values land."""
    vec = np.zeros(count, np.float32)
    vec[channels.ravel()] = values.ravel()
    return vec if np.array_equal(vec[channels], values) else None


def _scaled_outputs(producer, outputs: int, mul: np.ndarray) -> np.ndarray:
    """The producer's weights with each output channel's scaled: (O, ...) rows, or a Deconvolution's (C_in, O/g,
    ...) per group."""
    weights = np.asarray(get_blob(producer, "weights"), np.float32)
    if producer.soft_get("type") != "Deconvolution":
        return (weights.reshape(outputs, -1) * mul[:, None]).ravel()
    group = int(producer.soft_get("group") or 1)
    per_group, taps = outputs // group, int(np.prod(producer.kernel))
    blocks = weights.reshape(group, -1, per_group, taps) * mul.reshape(group, 1, per_group, 1)
    return blocks.ravel()


def _fold(graph, node) -> bool:
    port = _tensor_port(node)
    if port is None:
        return False
    x, out = node.in_node(port), node.out_node(0)
    found = _chain_to_producer(x)
    if found is None or not shape_tuple(x) or shape_tuple(out) != shape_tuple(x):
        return False
    producer, moves = found
    produced = producer.out_node(0)
    shape = shape_tuple(produced)
    if len(shape) < 2 or not 0 < int(np.prod(shape)) <= MAX_VALUES:
        return False
    factors = _factors(node, port, shape_tuple(x))  # (tensor-sized arrays: only once a producer is found)
    if factors is None:
        return False
    scale, shift = factors
    ids = np.arange(int(np.prod(shape))).reshape(shape)
    for move in moves:
        ids = np.transpose(ids, [int(a) for a in move.order]) if move.op == "Permute" else ids.reshape(
            shape_tuple(move.out_node(0)))
    channels = np.unravel_index(ids, shape)[1]
    add = _per_channel(shift, channels, shape[1])
    mul = None if scale is None else _per_channel(scale, channels, shape[1])
    if add is None or (scale is not None and mul is None):
        return False  # not one value per channel of the producer
    bias = get_blob(producer, "biases")
    bias = np.zeros(shape[1], np.float32) if bias is None else np.asarray(bias, np.float32).ravel()
    if mul is not None:
        set_blob(producer, "weights", _scaled_outputs(producer, shape[1], mul))
        bias = bias * mul
    set_blob(producer, "biases", bias + add)
    # the tensors on the way hold the results now, not the framework's tensors of those names
    forget_framework_tensor(produced)
    for move in moves:
        forget_framework_tensor(move.out_node(0))
    if node.op == "Eltwise":
        const = node.in_node(1 - port)
        const_op = const.producer()
        graph.remove_nodes_from([const.id, const_op.id] + [d.id for _, d, _ in const_op.blob_inputs()])
    else:
        graph.remove_nodes_from([d.id for _, d, _ in node.blob_inputs()])
    if out.soft_get("is_output"):  # the model's output keeps the name users know it by (as fusing.py does)
        (moves[-1] if moves else producer)["name"] = node.name
    graph.bypass(node, in_port=port)
    return True


# --- 2. moves up --------------------------------------------------------------------------
def hoist_moves(graph) -> int:
    """Moves every Permute and Reshape up where that helps (see the module doc); returns how many
    layers one was moved above."""
    moved = 0
    for node in graph.topological_ops():
        if node.id in graph and node.soft_get("op") in MOVES:
            path = _hoist_path(node)
            if path and node.out_node(0).soft_get("is_output"):
                # the nearest layer computes the model's output now: it takes the name users find it by
                path[0]["name"], node["name"] = node.name, path[0].name
            for layer in path:
                _swap(graph, layer, node)
            moved += len(path)
    return moved


def _uniform_scale_shift(node) -> bool:
    return all(np.ptp(np.ravel(v)) == 0 for v in (get_blob(node, "weights"), get_blob(node, "biases"))
               if v is not None and np.size(v))


def _passable(layer, move) -> bool:
    """Can `move` go above `layer` (computing the same)?"""
    if len(layer.data_inputs()) != 1 or len(layer.out_nodes()) != 1:
        return False
    if layer.op in ELEMENTWISE:
        return True
    if layer.op == "ScaleShift":
        return _uniform_scale_shift(layer)
    if layer.op not in AXIS_OPS:
        return False
    if move.op == "Permute":
        return True
    # a Reshape that keeps the last axis, above a layer normalizing over the last axis (attention's softmax
    # between a batched MatMul's [heads, rows, columns] and the 4-D view of it)
    shape, out = shape_tuple(layer.in_node(0)), shape_tuple(move.out_node(0))
    return int(layer.axis) % len(shape) == len(shape) - 1 and out[-1:] == shape[-1:]


def _hoist_path(move) -> list:
    """The layers `move` should go above, nearest first: as far up as it can go, when that ends on a
    move of its kind or puts a LayerNorm's or SoftMax's axis innermost; else none."""
    path, gain = [], False
    data = move.in_node(0)
    order = [int(a) for a in move.order] if move.op == "Permute" else None
    while True:
        layer = data.producer()
        if layer is None or _sole_consumer(data) is None:
            break
        if layer.soft_get("op") == move.op and path:
            return path
        if not _passable(layer, move):
            break
        if layer.op in AXIS_OPS and order is not None:
            rank = len(order)
            axis = int(layer.axis) % rank
            now_last, then_last = axis == rank - 1, order.index(axis) == rank - 1
            if now_last and not then_last:
                break  # it would leave the fast kernel
            gain = gain or then_last
        path.append(layer)
        data = layer.in_node(0)
    return path if gain else []


def _swap(graph, layer, move) -> None:
    """d_in -> layer -> mid -> move -> d_out  becomes  d_in -> move -> new -> layer -> d_out."""
    d_in, mid, d_out = layer.in_node(0), layer.out_node(0), move.out_node(0)
    if move.op == "Permute":
        order = [int(a) for a in move.order]
        new_shape = [int(d_in.shape[a]) for a in order]
        if layer.op in AXIS_OPS:
            layer["axis"] = order.index(int(layer.axis) % len(order))
    else:
        new_shape = shape_tuple(d_out)
        if layer.op in AXIS_OPS:
            layer["axis"] = len(new_shape) - 1
    outgoing = list(graph.out_edges(move.id, keys=True, data=True))
    for key, attrs in [(k, a) for _, _, k, a in graph.in_edges(layer.id, keys=True, data=True) if "bin" not in a]:
        graph.remove_edge(d_in.id, layer.id, key)
        graph.add_edge(d_in.id, move.id, **{**attrs, "in": 0})
    graph.remove_nodes_from([mid.id])
    new = graph.add_data(move.name, shape=new_shape)
    graph.add_edge(move.id, new.id, out=0)
    graph.add_edge(new.id, layer.id, **{"in": 0})
    for _, _, key, attrs in outgoing:
        graph.remove_edge(move.id, d_out.id, key)
        graph.add_edge(layer.id, d_out.id, **attrs)
    if layer.op == "ScaleShift":  # one factor: as many as the new channel axis has
        channels = new_shape[1] if len(new_shape) > 1 else new_shape[0]
        for blob in ("weights", "biases"):
            value = get_blob(layer, blob)
            if value is not None and np.size(value):
                set_blob(layer, blob, np.full(channels, np.ravel(value)[0], np.float32))
    if move.op == "Reshape":
        move["dim"] = list(new_shape)
    forget_framework_tensor(d_out)


# --- 3. moves merged --------------------------------------------------------------------------
def compose_moves(graph) -> int:
    """Merges every pair of moves it can (see the module doc); returns how many layers are gone."""
    removed = 0
    changed = True
    while changed:
        changed = False
        for node in graph.topological_ops():
            if node.id in graph and node.soft_get("op") in MOVES and _compose(graph, node):
                removed += 1
                changed = True
    return removed


def _identity(node) -> bool:
    if node.op == "Permute":
        return [int(a) for a in node.order] == list(range(len(node.order)))
    return shape_tuple(node.in_node(0)) == shape_tuple(node.out_node(0))


def _keeps_order(permute) -> bool:
    """The Permute moves only axes of size 1: the values keep their order (a Reshape)."""
    shape = shape_tuple(permute.in_node(0))
    moved = [int(a) for a in permute.order if shape[int(a)] != 1]
    return moved == sorted(moved)


def _same_move(a, b) -> bool:
    if a.op == "Permute":
        return [int(v) for v in a.order] == [int(v) for v in b.order]
    return shape_tuple(a.out_node(0)) == shape_tuple(b.out_node(0))


def _merge_twin(graph, node) -> bool:
    """Another move of the node's input, equal to it, reads the tensor: its readers read the node's output."""
    out = node.out_node(0)
    for other in node.in_node(0).consumers():
        if (other.id != node.id and other.soft_get("op") == node.op and _same_move(node, other)
                and not other.out_node(0).soft_get("is_output") and not out.soft_get("is_output")):
            for _, consumer, key, attrs in list(graph.out_edges(other.out_node(0).id, keys=True, data=True)):
                graph.add_edge(out.id, consumer, **attrs)
            graph.remove_op_with_data(other)
            return True
    return False


def _bypass(graph, node) -> None:
    """Removes a move whose input's producer (of one output, read by the move alone) computes the same now; at a
    model output that producer takes the move's name, which users find the output by."""
    if node.out_node(0).soft_get("is_output"):
        node.in_node(0).producer()["name"] = node.name
    graph.bypass(node)


def _compose(graph, node) -> bool:
    data = node.in_node(0)
    before = data.producer()
    if _identity(node) and (not node.out_node(0).soft_get("is_output") or (
            before is not None and before.soft_get("op") != "Parameter" and len(before.out_nodes()) == 1
            and _sole_consumer(data) is not None)):
        _bypass(graph, node)
        return True
    if _merge_twin(graph, node):
        return True
    if (node.op == "Permute" and before is not None and before.soft_get("op") == "Reshape"
            and _sole_consumer(data) is not None and _keeps_order(node)):
        # a Permute that only moves axes of size 1 after a Reshape: one Reshape (a 5-D reduction's kept dims)
        before["dim"] = list(shape_tuple(node.out_node(0)))
        before.attrs.pop("flatten", None)
        data.shape = node.out_node(0).shape
        _bypass(graph, node)
        return True
    if before is None or before.soft_get("op") != node.op or _sole_consumer(data) is None:
        return False
    if node.op == "Permute":  # transpose(transpose(x, p), q) == transpose(x, p[q])
        first = [int(a) for a in before.order]
        node["order"] = [first[int(a)] for a in node.order]
    else:
        node.attrs.pop("flatten", None)  # its `dim` is the output shape (emit writes it)
        node["dim"] = list(shape_tuple(node.out_node(0)))
    graph.bypass(before)
    return True
