"""Element-wise layers on oneDNN, in the layout (and type) of their input: the
activations (ReLU, Activation, Clamp, Power, a shared PReLU) and ScaleShift, alone or
as post-ops fused into the layer that feeds them; Eltwise (sum with coefficients, mul,
max) of same-shaped inputs, and with one input broadcast (a binary primitive: what the
Tile layers of a TensorFlow broadcast computed, patterns.py).

An activation is a list of post-ops (`unary_post_ops`): most are one eltwise post-op;
a ScaleShift with one scale and one shift is oneDNN's `linear`, a per-channel one two
binary post-ops (mul, add) whose operands are its blobs."""
from __future__ import annotations

import numpy as np

from .library import DnnlError
from .op import NativeOp, Unsupported, constant, register
from .primitives import Desc, binary_pd, eltwise_pd, sum_pd

_ACTIVATIONS = {"sigmoid": ("logistic", 0.0, 0.0), "tanh": ("tanh", 0.0, 0.0), "abs": ("abs", 0.0, 0.0),
                "relu6": ("clip_v2", 0.0, 6.0), "exp": ("exp", 0.0, 0.0), "log": ("log", 0.0, 0.0),
                "round": ("round", 0.0, 0.0),  # (oneDNN's round: halves to even; no floor, ceil or trunc: numpy)
                "softplus": ("soft_relu", 1.0, 0.0)}  # (log(1 + exp(alpha x)) / alpha)


def _uniform(values) -> float | None:
    """The one value of a blob whose elements are all equal (None otherwise)."""
    flat = np.asarray(values, np.float32).ravel()
    return float(flat[0]) if flat.size and np.all(flat == flat[0]) else None


def unary_post_ops(step, shape=None) -> list | None:
    """The post-ops computing a one-input element-wise layer (kernel attributes as the
    numpy kernel parsed them), or None when oneDNN has none. `shape`: the input's, for
    a per-channel ScaleShift (its operands are [1, C, 1, ...])."""
    layer_type, kernel = step.layer.type, step.kernel
    if layer_type == "ReLU":
        return [("eltwise", "relu", kernel.slope, 0.0)]
    if layer_type == "Clamp":
        return [("eltwise", "clip_v2", kernel.lo, kernel.hi)]
    if layer_type == "Activation":
        kind = kernel.kind
        if kind == "elu":
            return [("eltwise", "elu", kernel.alpha, 0.0)]
        if kind == "relu":
            return [("eltwise", "relu", kernel.slope, 0.0)]
        if kind == "gelu":
            return [("eltwise", "gelu_" + kernel.approximation, 0.0, 0.0)]
        return [("eltwise",) + _ACTIVATIONS[kind]] if kind in _ACTIVATIONS else None
    if layer_type == "Power":
        if kernel.power == 1.0:
            return [("eltwise", "linear", kernel.scale, kernel.shift)]
        if kernel.shift == 0.0:  # (scale x)^p = scale^p x^p
            return [("eltwise", "pow", float(np.float32(kernel.scale) ** np.float32(kernel.power)), kernel.power)]
        return None
    if layer_type == "PReLU" and kernel.slopes.size == 1:
        return [("eltwise", "relu", float(kernel.slopes[0]), 0.0)]
    if layer_type == "ScaleShift":
        w, b = kernel.weights, kernel.biases
        scale = 1.0 if w is None else _uniform(w)
        shift = 0.0 if b is None else _uniform(b)
        if scale is not None and shift is not None:
            return [("eltwise", "linear", scale, shift)]
        if shape is None or len(shape) < 2:
            return None
        dims = (1, shape[1]) + (1,) * (len(shape) - 2)
        ops = []
        for values, alg, name in ((w, "mul", "weights"), (b, "add", "biases")):
            if values is not None:
                ops.append(("binary", alg, np.asarray(values, np.float32).reshape(dims), dims,
                            (step.layer.id, name)))
        return ops
    return None


@register("ReLU", "Clamp", "Activation", "Power", "PReLU", "ScaleShift")
class ActivationOp(NativeOp):
    """One element-wise layer (or, made by patterns.py, a gated activation such as
    hard-swish standing for several): its first post-op as an eltwise or binary
    primitive, the others as its post-ops."""
    inplace = True
    accepts_post_ops = True

    def __init__(self, step, kernel, d, network, ops=None):
        super().__init__(step, kernel, d, network)
        self.ops = ops

    def all_post_ops(self) -> list:
        return list(self.ops[1:]) + self.post_ops

    def create(self, in_descs, in_shapes, out_shapes):
        if self.ops is None:
            self.ops = unary_post_ops(self.step, in_shapes[0])
        if not self.ops:
            raise Unsupported(f"{self.layer.type} {getattr(self.kernel, 'kind', '')}".strip() + " has no oneDNN form")
        first = self.ops[0]
        src = self.follow(in_descs[0], in_shapes[0])
        if first[0] == "eltwise":
            self.pd = eltwise_pd(self.d, self.attr(), first[1], src, src, first[2], first[3])
        else:  # a per-channel ScaleShift: a binary primitive with the blob as its second operand
            self.pd = binary_pd(self.d, self.attr(), first[1], src, Desc.plain(self.d, first[3]), src)
        return [src], [src]

    def bind(self, ins, outs, scratch):
        first = self.ops[0]
        if first[0] == "eltwise":
            args = {"DNNL_ARG_SRC": ins[0], "DNNL_ARG_DST": outs[0]}
        else:
            _, _, values, dims, key = first
            args = {"DNNL_ARG_SRC_0": ins[0], "DNNL_ARG_DST": outs[0],
                    "DNNL_ARG_SRC_1": constant(self.d, self.network, key[0], key[1], values, Desc.plain(self.d, dims))}
        return [self.primitive(self.pd, args, scratch)]


# Eltwise's comparisons as oneDNN's binary algorithms (1 where it holds, else 0, in the output's type)
BINARY_COMPARE = {"less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge", "equal": "eq",
                  "not_equal": "ne"}


@register("Eltwise")
class EltwiseOp(NativeOp):
    """Eltwise of same-shaped inputs (every input in the layout of the first), or of two
    inputs the second of which is broadcast (`broadcast`, patterns.py)."""
    inplace = True

    def __init__(self, step, kernel, d, network, broadcast: bool = False):
        super().__init__(step, kernel, d, network)
        self.broadcast = broadcast

    def create(self, in_descs, in_shapes, out_shapes):
        k, d = self.kernel, self.d
        if k.op not in ("sum", "mul", "max") and k.op not in BINARY_COMPARE:
            raise Unsupported(f"Eltwise {k.op}")  # (floor_div, floor_mod: numpy's)
        n = len(in_shapes)
        first = self.follow(in_descs[0], in_shapes[0])
        if self.broadcast:
            alg = {"sum": "add", "mul": "mul", "max": "max", **BINARY_COMPARE}[k.op]
            given = in_descs[1] or Desc.plain(d, in_shapes[1])
            tag = first.layout()
            # the small input as it is, else in the layout and type of the first (often the same bytes)
            for second in [given] + ([Desc.tagged(d, in_shapes[1], tag, first.dt)] if tag != "blocked" else []):
                try:
                    self.pd = binary_pd(d, self.attr(), alg, first, second, first)
                except DnnlError:
                    continue
                if not self.pd.implementation.startswith("ref"):
                    break
            return [first, second], [first]
        srcs = [first] * n  # every input in the layout of the first (reordered if not)
        if k.op in BINARY_COMPARE:
            if n != 2:
                raise Unsupported(f"Eltwise {k.op} of {n} inputs")
            self.pd = binary_pd(d, self.attr(), BINARY_COMPARE[k.op], first, first, first)
        elif k.op == "sum":
            scales = k.coeff if k.coeff is not None else [1.0] * n
            self.pd = sum_pd(d, self.attr(), first, scales, srcs)
        else:
            if n != 2:
                raise Unsupported(f"Eltwise {k.op} of {n} inputs")
            self.pd = binary_pd(d, self.attr(), k.op, first, first, first)
        return srcs, [first]

    def bind(self, ins, outs, scratch):
        if self.kernel.op == "sum" and not self.broadcast:
            args = {f"DNNL_ARG_MULTIPLE_SRC+{i}": m for i, m in enumerate(ins)}
        else:
            args = {"DNNL_ARG_SRC_0": ins[0], "DNNL_ARG_SRC_1": ins[1]}
        args["DNNL_ARG_DST"] = outs[0]
        return [self.primitive(self.pd, args, scratch)]
