"""TensorFlow sub-graphs that are one IR layer, replaced once TensorFlow's shapes
and constant values are known (before lowering). In this order:

1. atrous convolution: SpaceToBatchND -> Conv2D/DepthwiseConv2dNative (VALID) ->
   BatchToSpaceND is one convolution with dilation = the block shape, pads =
   paddings - crops; a dilated Conv1D's (SpaceToBatchND of NWC -> ExpandDims to
   N1WC -> Conv2D -> Squeeze -> BatchToSpaceND) the same on W;
2. zero padding: a Pad with zeros on H and W only, read by nothing but a
   convolution, goes into the convolution's pads; before a max pooling only when
   its input cannot be negative (it comes from Relu/Relu6/Sigmoid: a padded zero
   then never wins); before an average pooling that pads nothing itself (the
   average then counts the zeros: exclude-pad="false");
3. leaky ReLU: Maximum(x, Mul(x, alpha)) with a scalar 0 <= alpha <= 1;
4. tf.math.l2_normalize: x * Rsqrt(Maximum(Sum(Square(x), axes, keep_dims), eps))
   over the channels (or C, H, W) -> Normalize. (Normalize divides by
   sqrt(sum + eps) where TensorFlow takes max(sum, eps): the same unless the
   sum of squares is about eps.)
5. GELU: 0.5 * x * erfc(-x / sqrt 2) (tf.nn.gelu, Keras' "gelu"), 0.5 * x * (1 + erf(x /
   sqrt 2)) (BERT's) and the tanh form 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 *
   x^3))), with the products in any order -> one Activation gelu (an eltwise post-op on
   oneDNN, not seven layers).
6. layer normalization (Keras' LayerNormalization over the last axis): Mean, SquaredDifference,
   Mean, + eps, Rsqrt, [* gamma], x * s + (-mean * s [+ beta]) -> one LayerNorm layer (eleven
   layers, two of them reductions on numpy with broadcasts between, before).
A sub-graph whose inner tensors are read by anything else stays as it is.
"""
from __future__ import annotations

import numpy as np

from core.front.tf.ops.activation import Activations, Gelu
from core.front.tf.ops.base import TFOp
from core.ops.normalization import LayerNorm, Normalize
from ir.special import GELU_TANH_CUBIC, SQRT_2_OVER_PI

NON_NEGATIVE = {"Relu", "Relu6", "Sigmoid", "Softmax"}


def _only_reader(data):
    """The one op reading `data` (and nothing else uses it), else None."""
    readers = data.consumers()
    if len(readers) != 1 or data.soft_get("is_output"):
        return None
    return readers[0]


def _producer(data, *ops):
    node = data.producer()
    if node is None or node.soft_get("tf_class") is None or (ops and node.tf_op not in ops):
        return None
    return node


def _value(data):
    value = data.soft_get("value")
    return None if value is None else np.asarray(value)


def _reconnect_input(graph, node, port, new_src):
    for u, v, key, a in list(graph.in_edges(node.id, keys=True, data=True)):
        if a.get("in") == port:
            graph.remove_edge(u, v, key)
    graph.add_edge(new_src.id, node.id, **{"in": port})


def _remove_ops(graph, *ops):
    """Removes ops and their output tensors (the caller has rewired every reader)."""
    for op in ops:
        if op.id in graph:
            graph.remove_op_with_data(op)


# --- 1. atrous convolution -------------------------------------------------------------
def _atrous_chain(b2s):
    """(space-to-batch, first op after it, convolution, last op before batch-to-space) of an
    atrous convolution ending at `b2s`, 2-D or a Conv1D's (ExpandDims ... Squeeze), else None."""
    last = _producer(b2s.in_node(0), "Conv2D", "DepthwiseConv2dNative", "Squeeze")
    if last is None or _only_reader(last.out_node(0)) is None:
        return None
    conv, first = last, None
    if last.tf_op == "Squeeze":
        conv = _producer(last.in_node(0), "Conv2D", "DepthwiseConv2dNative")
        first = conv and _producer(conv.in_node(0), "ExpandDims")
        if first is None or _only_reader(conv.out_node(0)) is None or _only_reader(first.out_node(0)) is None:
            return None
        axis = _value(first.in_node(1))
        if axis is None or int(axis.ravel()[0]) % 4 != 1:  # (1 or -3: conv1d's NWC -> N1WC, the 1-D block W's)
            return None
    s2b = _producer((first or conv).in_node(0), "SpaceToBatchND")
    if s2b is None or _only_reader(s2b.out_node(0)) is None:
        return None
    return s2b, first or conv, conv, last


def fold_atrous(graph):
    for b2s in graph.op_nodes(tf_op="BatchToSpaceND"):
        chain = _atrous_chain(b2s)
        if chain is None:
            continue
        s2b, first, conv, last = chain
        block, pads = _value(s2b.in_node(1)), _value(s2b.in_node(2))
        block2, crops = _value(b2s.in_node(1)), _value(b2s.in_node(2))
        if any(v is None for v in (block, pads, block2, crops)) or not np.array_equal(block, block2):
            continue
        if conv.tf["padding"] != "VALID" or np.any(conv.tf["dilation"] != 1) or np.any(conv.tf["strides"] != 1):
            continue
        begin, end = (pads[:, 0] - crops[:, 0]).astype(np.int64), (pads[:, 1] - crops[:, 1]).astype(np.int64)
        block = block.astype(np.int64).ravel()
        if begin.min() < 0 or end.min() < 0:
            continue
        if len(block) == 1:  # W of N1WC
            block, begin, end = (np.concatenate([[v0], v]).astype(np.int64) for v0, v in
                                 ((1, block), (0, begin), (0, end)))
        conv.tf.update({"dilation": block, "pad_begin": begin, "pad_end": end, "padding": "EXPLICIT"})
        if first is not conv:  # (the N1WC tensors between: the unbatched sizes now)
            for data, outer in ((first.out_node(0), s2b.in_node(0)), (conv.out_node(0), b2s.out_node(0))):
                data.shape = np.insert(np.asarray(outer.shape, np.int64), 1, 1)
        _reconnect_input(graph, first, 0, s2b.in_node(0))
        graph.remove_node(last.out_node(0).id)  # the space-to-batch tensor only fed BatchToSpaceND
        out = b2s.out_node(0)
        graph.remove_edge(b2s.id, out.id)
        graph.connect(last, out, out=0)
        last["name"] = b2s.name  # it computes BatchToSpaceND's tensor now
        _remove_ops(graph, b2s, s2b)


# --- 2. zero padding into the next convolution / pooling ---------------------------------
def _zero_spatial_pads(pad_node):
    if pad_node.tf_op not in ("Pad", "PadV2"):
        return None
    pads = _value(pad_node.in_node(1))
    if pads is None or pads.shape not in ((4, 2), (5, 2)) or np.any(pads[0]) or np.any(pads[-1]):
        return None
    if pad_node.tf_op == "PadV2":
        fill = _value(pad_node.in_node(2))
        if fill is None or float(fill.ravel()[0]) != 0.0:
            return None
    return pads[1:-1].astype(np.int64)


def fold_padding(graph):
    for pad in graph.op_nodes():
        if pad.soft_get("tf_class") is None or pad.id not in graph:
            continue
        pads = _zero_spatial_pads(pad)
        if pads is None or pad.out_node(0).soft_get("value") is not None:
            continue
        reader = _only_reader(pad.out_node(0))
        if reader is None or reader.soft_get("tf_class") is None or reader.in_node(0).id != pad.out_node(0).id:
            continue
        op = reader.tf_op
        if len(reader.tf.get("pad_begin", ())) != len(pads):
            continue
        if op in ("MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D"):
            kernel = np.asarray(reader.tf["kernel"])
            if np.any(reader.tf["pad_begin"] + pads[:, 0] >= kernel) or \
                    np.any(reader.tf["pad_end"] + pads[:, 1] >= kernel):
                continue
            source = _producer(pad.in_node(0))
            if op.startswith("Max") and (source is None or source.tf_op not in NON_NEGATIVE):
                continue
            if op.startswith("Avg"):
                if np.any(reader.tf["pad_begin"]) or np.any(reader.tf["pad_end"]):
                    continue
                reader.tf["padded_zeros"] = True
        elif op not in ("Conv2D", "DepthwiseConv2dNative", "Conv3D"):
            continue
        reader.tf["pad_begin"] = reader.tf["pad_begin"] + pads[:, 0]
        reader.tf["pad_end"] = reader.tf["pad_end"] + pads[:, 1]
        _reconnect_input(graph, reader, 0, pad.in_node(0))
        _remove_ops(graph, pad)


# --- 3. leaky ReLU ----------------------------------------------------------------------
def fold_leaky_relu(graph):
    for node in graph.op_nodes(tf_op="Maximum"):
        if node.soft_get("tf_class") is None:
            continue
        a, b = node.data_inputs()
        for x, scaled in ((a, b), (b, a)):
            mul = _producer(scaled, "Mul")
            if mul is None or _only_reader(scaled) is None:
                continue
            m0, m1 = mul.data_inputs()
            alpha = _value(m1) if m0.id == x.id else _value(m0) if m1.id == x.id else None
            if alpha is None or alpha.size != 1 or not 0.0 <= float(alpha.ravel()[0]) <= 1.0:
                continue
            node["tf_op"] = "LeakyRelu"
            node["tf_class"] = Activations
            node.tf["alpha"] = float(alpha.ravel()[0])
            for u, v, key in list(graph.in_edges(node.id, keys=True)):
                graph.remove_edge(u, v, key)
            graph.connect(x, node, inp=0)
            _remove_ops(graph, mul)
            break


# --- 4. l2 normalization -----------------------------------------------------------------
class L2Normalize(TFOp):
    """The matched tf.math.l2_normalize (no TF op of this name: only patterns make it)."""

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        channels = int(lw.tf_shape(x)[-1])
        lw.keep_inputs(node, x)
        lw.retype(node, Normalize, {"across_spatial": node.tf["across_spatial"], "channel_shared": False,
                                    "eps": node.tf["eps"]})
        lw.add_blob(node, "weights", np.ones(channels, np.float32))


def fold_l2_normalize(graph):
    for node in graph.op_nodes(tf_op="Mul"):
        if node.soft_get("tf_class") is None:
            continue
        a, b = node.data_inputs()
        for x, inv in ((a, b), (b, a)):
            chain = _l2_chain(x, inv)
            if chain is None:
                continue
            rank, axes, eps, ops = chain
            if axes == [rank - 1] and rank in (2, 4):
                across = False
            elif rank == 4 and axes == [1, 2, 3]:
                across = True
            else:
                continue
            node["tf_op"] = "L2Normalize"
            node["tf_class"] = L2Normalize
            node.tf.update({"across_spatial": across, "eps": eps})
            for u, v, key in list(graph.in_edges(node.id, keys=True)):
                graph.remove_edge(u, v, key)
            graph.connect(x, node, inp=0)
            _remove_ops(graph, *ops)
            break


def _l2_chain(x, inv):
    rsqrt = _producer(inv, "Rsqrt")
    if rsqrt is None or _only_reader(inv) is None:
        return None
    maximum = _producer(rsqrt.in_node(0), "Maximum")
    if maximum is None or _only_reader(rsqrt.in_node(0)) is None:
        return None
    m0, m1 = maximum.data_inputs()
    total, eps = (m0, _value(m1)) if _value(m0) is None else (m1, _value(m0))
    if eps is None or eps.size != 1:
        return None
    reduce = _producer(total, "Sum")
    if reduce is None or _only_reader(total) is None or not reduce.tf["keep_dims"]:
        return None
    square = _producer(reduce.in_node(0), "Square")
    axes = _value(reduce.in_node(1))
    if square is None or axes is None or _only_reader(reduce.in_node(0)) is None or square.in_node(0).id != x.id:
        return None
    rank = len(x.shape)
    axes = sorted({int(a) % rank for a in axes.ravel()})
    return rank, axes, float(eps.ravel()[0]), (rsqrt, maximum, reduce, square)


# --- 5. GELU ------------------------------------------------------------------------------
_INV_SQRT2 = 0.5 ** 0.5


def _same_shape(a, b) -> bool:
    """(A constant of a higher rank broadcasts the result beyond x's shape: not the one-input layer then.)"""
    return a.soft_get("shape") is not None and b.soft_get("shape") is not None and \
        tuple(int(d) for d in a.shape) == tuple(int(d) for d in b.shape)


def _scalar(data) -> float | None:
    value = _value(data)
    return float(value.ravel()[0]) if value is not None and value.size == 1 else None


def _near(value: float | None, target: float) -> bool:
    return value is not None and abs(value - target) <= 1e-5 * abs(target)


class _Match:
    """The ops of a candidate sub-graph, each output read only inside it (but x's)."""

    def __init__(self):
        self.ops = []

    def op(self, data, *types):
        node = _producer(data, *types)
        if node is None or _only_reader(data) is None:
            return None
        self.ops.append(node)
        return node

    def pair(self, node):
        """(constant, other) inputs of a two-input op with one scalar constant, else (None, None)."""
        a, b = node.data_inputs()
        if _scalar(a) is not None and _value(b) is None:
            return _scalar(a), b
        if _scalar(b) is not None and _value(a) is None:
            return _scalar(b), a
        return None, None


def _scaled(m: _Match, data, factor: float):
    """x where data = x * factor (a Mul by the constant, or a RealDiv by its inverse), else None."""
    node = m.op(data, "Mul", "RealDiv")
    if node is None:
        return None
    if node.tf_op == "RealDiv":
        x, divisor = node.data_inputs()
        ok = _value(x) is None and bool(_scalar(divisor)) and _near(1.0 / _scalar(divisor), factor)
        return x if ok else None
    c, x = m.pair(node)
    return x if _near(c, factor) else None


def _gate(m: _Match, data):
    """(x, approximation) when data is GELU's gate over x: 2 * Phi(x) or its tanh form."""
    erfc = m.op(data, "Erfc")
    if erfc is not None:  # erfc(-x / sqrt 2): a Neg then the scale, or a negative scale
        arg, mark = erfc.in_node(0), len(m.ops)
        neg = _scaled(m, arg, _INV_SQRT2)
        neg = neg is not None and m.op(neg, "Neg")
        if neg:
            return neg.in_node(0), "erf"
        del m.ops[mark:]
        return _scaled(m, arg, -_INV_SQRT2), "erf"
    add = m.op(data, "AddV2", "Add")
    if add is None:
        return None, None
    one, term = m.pair(add)
    if not _near(one, 1.0):
        return None, None
    erf = m.op(term, "Erf")
    if erf is not None:
        return _scaled(m, erf.in_node(0), _INV_SQRT2), "erf"
    tanh = m.op(term, "Tanh")
    inner = tanh and _scaled(m, tanh.in_node(0), SQRT_2_OVER_PI)
    total = inner is not None and m.op(inner, "AddV2", "Add")
    if not total:
        return None, None
    a, b = total.data_inputs()
    for x, cubic in ((a, b), (b, a)):
        mark = len(m.ops)
        cube = _scaled(m, cubic, GELU_TANH_CUBIC)
        power = cube is not None and m.op(cube, "Pow")
        if power and power.in_node(0).id == x.id and _scalar(power.in_node(1)) == 3.0:
            return x, "tanh"
        del m.ops[mark:]
    return None, None


def _factors(m: _Match, node) -> list:
    """The factors of the product that `node` (a Mul) computes: Muls read only by it are opened."""
    leaves = []
    for data in node.data_inputs():
        inner = _value(data) is None and m.op(data, "Mul")
        leaves.extend(_factors(m, inner) if inner else [data])
    return leaves


def _gelu_of(node):
    """(x, approximation, ops to remove) when the Mul `node` computes GELU, else None."""
    m = _Match()
    factors = _factors(m, node)
    constants = [_scalar(f) for f in factors if _value(f) is not None]
    tensors = [f for f in factors if _value(f) is None]
    if len(tensors) != 2 or None in constants or not _near(float(np.prod(constants)), 0.5):
        return None
    for x, gate in (tensors, tensors[::-1]):
        mark = len(m.ops)
        gx, approximation = _gate(m, gate)
        if gx is not None and gx.id == x.id and _same_shape(node.out_node(0), x):
            return x, approximation, m.ops
        del m.ops[mark:]
    return None


def fold_gelu(graph):
    for node in graph.op_nodes(tf_op="Mul"):
        if node.id not in graph or node.soft_get("tf_class") is None:
            continue
        match = _gelu_of(node)
        if match is None:
            continue
        x, approximation, ops = match
        node["tf_op"] = "Gelu"
        node["tf_class"] = Gelu
        node.tf["approximation"] = approximation
        for u, v, key in list(graph.in_edges(node.id, keys=True)):
            graph.remove_edge(u, v, key)
        graph.connect(x, node, inp=0)
        _remove_ops(graph, *ops)


# --- 6. layer normalization ----------------------------------------------------------------
class LayerNormTF(TFOp):
    """The matched Keras LayerNormalization (no TF op of this name: only patterns make it)."""

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        lw.keep_inputs(node, x)
        lw.retype(node, LayerNorm, {"axis": lw.ir_axis(x, -1), "eps": node.tf["eps"]})
        for name in ("weights", "biases"):
            if node.tf.get(name) is not None:
                lw.add_blob(node, name, node.tf[name])


def _through(data):
    """The tensor a StopGradient / Identity passes on, else data itself."""
    node = _producer(data, "StopGradient", "Identity")
    return node.in_node(0) if node is not None else data


def _layer_norm_of(node):
    """(x, eps, gamma or None, beta or None, ops) when the AddV2 `node` ends a layer normalization over the
    last axis of x, else None."""
    ops = [node]

    def op(data, *types):
        found = _producer(data, *types)
        if found is not None:
            ops.append(found)
        return found

    def scaled_by(data):  # Mul(a, s): (a, s)
        mul = op(data, "Mul")
        return tuple(mul.data_inputs()) if mul is not None else (None, None)

    for first, second in (node.data_inputs(), node.data_inputs()[::-1]):
        mark = len(ops)
        x, s = scaled_by(first)
        tail = op(second, "AddV2", "Add")
        beta, term = None, second
        if tail is not None:
            a, b = tail.data_inputs()
            beta, term = (_value(a), b) if _value(a) is not None else (_value(b), a)
        neg, s2 = scaled_by(term)
        if x is None or neg is None:
            del ops[mark:]
            continue
        if s2.id != s.id:
            x, s, neg, s2 = s, x, s2, neg  # (the product's factors in the other order)
        neg_op = op(neg, "Neg")
        mul = _producer(s, "Mul")
        gamma, inv = None, s
        if mul is not None:
            a, b = mul.data_inputs()
            gamma, inv = (_value(b), a) if _value(b) is not None else (_value(a), b)
            ops.append(mul)
        rsqrt = op(inv, "Rsqrt")
        add = rsqrt and op(rsqrt.in_node(0), "AddV2", "Add")
        if neg_op is None or not add or s2.id != s.id:
            del ops[mark:]
            continue
        a, b = add.data_inputs()
        eps, var = (_scalar(b), a) if _scalar(b) is not None else (_scalar(a), b)
        mean = neg_op.in_node(0)
        var_mean = op(var, "Mean")
        square = var_mean and op(var_mean.in_node(0), "SquaredDifference")
        mean_op = op(mean, "Mean")
        if eps is None or not square or mean_op is None or mean_op.in_node(0).id != x.id:
            del ops[mark:]
            continue
        d0, d1 = square.data_inputs()
        if {d0.id, _through(d1).id} != {x.id, mean.id}:
            del ops[mark:]
            continue
        if _through(d1).id != d1.id:
            ops.append(d1.producer())
        rank = len(x.shape)
        for reduce in (mean_op, var_mean):
            axes = _value(reduce.in_node(1))
            if axes is None or sorted({int(v) % rank for v in axes.ravel()}) != [rank - 1] or \
                    not reduce.tf.get("keep_dims"):
                return None
        size = int(x.shape[-1])
        for values in (gamma, beta):
            if values is not None and np.asarray(values).size not in (1, size):
                return None
        inside = {o.id for o in ops}
        for o in ops[1:]:  # (every inner tensor read only inside the pattern)
            for out in o.out_nodes().values():
                if out.soft_get("is_output") or any(c.id not in inside for c in out.consumers()):
                    return None
        if not _same_shape(node.out_node(0), x):
            return None
        full = [None if v is None else np.broadcast_to(np.asarray(v, np.float32).ravel(), (size,)).copy()
                for v in (gamma, beta)]
        return x, eps, full[0], full[1], ops[1:]
    return None


def fold_layer_norm(graph):
    for node in graph.op_nodes(tf_op="AddV2") + graph.op_nodes(tf_op="Add"):
        if node.id not in graph or node.soft_get("tf_class") is None:
            continue
        match = _layer_norm_of(node)
        if match is None:
            continue
        x, eps, gamma, beta, ops = match
        node["tf_op"] = "LayerNorm"
        node["tf_class"] = LayerNormTF
        node.tf.update({"eps": eps, "weights": gamma, "biases": beta})
        for u, v, key in list(graph.in_edges(node.id, keys=True)):
            graph.remove_edge(u, v, key)
        graph.connect(x, node, inp=0)
        _remove_ops(graph, *{o.id: o for o in ops}.values())


def replace_patterns(graph):
    fold_atrous(graph)
    fold_padding(graph)
    fold_leaky_relu(graph)
    fold_l2_normalize(graph)
    fold_gelu(graph)
    fold_layer_norm(graph)
