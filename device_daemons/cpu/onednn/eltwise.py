"""Element-wise layers on oneDNN: the activations (ReLU, Activation, Clamp), alone or
as post-ops fused into the convolution / fully connected layer that feeds them, and
Eltwise (sum with coefficients, mul, max)."""
from __future__ import annotations

from .op import NativeOp, Unsupported, register
from .primitives import Desc, binary_pd, eltwise_pd, sum_pd


def activation_post_op(layer_type: str, kernel):
    """("eltwise", algorithm, alpha, beta) computing this activation kernel, or None."""
    if layer_type == "ReLU":
        return ("eltwise", "relu", kernel.slope, 0.0)
    if layer_type == "Clamp":
        return ("eltwise", "clip_v2", kernel.lo, kernel.hi)
    if layer_type == "Activation":
        kind = kernel.kind
        return {"sigmoid": ("eltwise", "logistic", 0.0, 0.0), "tanh": ("eltwise", "tanh", 0.0, 0.0),
                "elu": ("eltwise", "elu", kernel.alpha, 0.0), "abs": ("eltwise", "abs", 0.0, 0.0),
                "relu6": ("eltwise", "clip_v2", 0.0, 6.0),
                "relu": ("eltwise", "relu", kernel.slope, 0.0)}.get(kind)
    return None


@register("ReLU", "Clamp", "Activation")
class ActivationOp(NativeOp):
    inplace = True

    def create(self, in_descs, in_shapes, out_shapes):
        op = activation_post_op(self.layer.type, self.kernel)
        if op is None:
            raise Unsupported(f"activation {self.layer.type}")
        src = in_descs[0] or Desc.plain(self.d, in_shapes[0])
        self.pd = eltwise_pd(self.d, self.attr(), op[1], src, src, op[2], op[3])
        return [src], [src]

    def bind(self, ins, outs, scratch):
        return [self.primitive(self.pd, {"DNNL_ARG_SRC": ins[0], "DNNL_ARG_DST": outs[0]}, scratch)]


@register("Eltwise")
class EltwiseOp(NativeOp):
    inplace = True

    def create(self, in_descs, in_shapes, out_shapes):
        k, d = self.kernel, self.d
        n = len(in_shapes)
        first = in_descs[0] or Desc.plain(d, in_shapes[0])
        srcs = [first] * n  # every input in the layout of the first (reordered if not)
        if k.op == "sum":
            scales = k.coeff if k.coeff is not None else [1.0] * n
            self.pd = sum_pd(d, self.attr(), first, scales, srcs)
        else:
            if n != 2:
                raise Unsupported(f"Eltwise {k.op} of {n} inputs")
            self.pd = binary_pd(d, self.attr(), k.op, first, first, first)
        return srcs, [first]

    def bind(self, ins, outs, scratch):
        if self.kernel.op == "sum":
            args = {f"DNNL_ARG_MULTIPLE_SRC+{i}": m for i, m in enumerate(ins)}
        else:
            args = {"DNNL_ARG_SRC_0": ins[0], "DNNL_ARG_SRC_1": ins[1]}
        args["DNNL_ARG_DST"] = outs[0]
        return [self.primitive(self.pd, args, scratch)]
