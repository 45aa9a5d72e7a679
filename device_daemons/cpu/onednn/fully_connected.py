"""FullyConnected (Caffe InnerProduct) on oneDNN: the source in whatever layout its
producer left it (weights are reordered to match once), bias and activations fused.
bf16: source and weights bf16, bias f32, accumulation f32. MatMul of two tensors
(attention's products): oneDNN's matmul on operands of one rank (leading axes of 1 broadcast),
plain or unblocked views, with post-ops; transposed operands (the attributes) stay on numpy."""
from __future__ import annotations

from .library import DnnlError
from .op import NativeOp, Unsupported, constant, register
from .primitives import Desc, inner_product_pd, matmul_pd


@register("FullyConnected", "InnerProduct")
class FullyConnectedOp(NativeOp):
    accepts_post_ops = True

    def create(self, in_descs, in_shapes, out_shapes):
        k, d = self.kernel, self.d
        shape = tuple(in_shapes[0])
        axis = k.axis + len(shape) if k.axis < 0 else k.axis
        if axis != 1 or not 2 <= len(shape) <= 5:
            raise Unsupported("FullyConnected other than over axis 1 of a 2-D to 5-D input")
        self.w_dims = (k.out_size,) + shape[1:]
        out = (shape[0], k.out_size)
        bias = Desc.plain(d, (k.out_size,)) if k.bias is not None else None
        src = in_descs[0] if in_descs[0] is not None and in_descs[0].dt == self.dt else None
        weights, dst = Desc.any(d, self.w_dims, self.dt), Desc.any(d, out, self.out_dt())
        self.pd = None
        if src is not None:
            try:
                self.pd = inner_product_pd(d, self.attr(), src, weights, bias, dst)
            except DnnlError:
                pass
        if self.pd is None or self.pd.implementation.startswith("ref"):
            # no fast implementation for this source layout: let it choose one (a reorder before it)
            self.pd = inner_product_pd(d, self.attr(), Desc.any(d, shape, self.dt), weights, bias, dst)
        if self.pd.implementation.startswith("ref"):
            raise Unsupported(f"oneDNN has only its reference inner product for {self.layer.name}")
        return [self.pd.md("src_md", dims=shape)], [self.pd.md("dst_md", dims=out)]

    def bind(self, ins, outs, scratch):
        k = self.kernel
        weights = constant(self.d, self.network, self.layer.id, "weights", k.weights,
                           self.pd.md("weights_md", dims=self.w_dims))
        args = {"DNNL_ARG_SRC": ins[0], "DNNL_ARG_WEIGHTS": weights, "DNNL_ARG_DST": outs[0]}
        if k.bias is not None:
            args["DNNL_ARG_BIAS"] = constant(self.d, self.network, self.layer.id, "biases", k.bias,
                                             Desc.plain(self.d, (k.out_size,)))
        return [self.primitive(self.pd, args, scratch)]


@register("MatMul")
class MatMulOp(NativeOp):
    """Attention's scale after the product (a ScaleShift of one factor) is a post-op. Each operand is
    read as its producer left it where that is an unblocked layout oneDNN's fast matmul takes (a
    transposed view: a Permute that was made a view), else plain (a reorder before it)."""
    accepts_post_ops = True

    def create(self, in_descs, in_shapes, out_shapes):
        k, d = self.kernel, self.d
        a, b, out = (tuple(s) for s in (in_shapes[0], in_shapes[1], out_shapes[0]))
        if k.transpose_a or k.transpose_b or not len(a) == len(b) == len(out) or not 2 <= len(out) <= 5:
            raise Unsupported("a MatMul with a transposed operand or operands of other ranks (numpy runs it)")
        plain = [Desc.plain(d, a, self.dt), Desc.plain(d, b, self.dt)]
        given = [desc if desc is not None and desc.dt == self.dt and desc.unblocked() else p
                 for desc, p in zip(in_descs, plain)]
        dst = Desc.plain(d, out, self.out_dt())
        for src, weights in dict.fromkeys([tuple(given), (given[0], plain[1]), (plain[0], given[1]), tuple(plain)]):
            try:
                self.pd = matmul_pd(d, self.attr(), src, weights, dst)
            except DnnlError:
                continue
            if not self.pd.implementation.startswith("ref"):
                return [src, weights], [self.pd.md("dst_md", dims=out)]
        raise Unsupported(f"oneDNN has only its reference matmul for {self.layer.name}")

    def bind(self, ins, outs, scratch):
        return [self.primitive(self.pd, {"DNNL_ARG_SRC": ins[0], "DNNL_ARG_WEIGHTS": ins[1],
                                         "DNNL_ARG_DST": outs[0]}, scratch)]
