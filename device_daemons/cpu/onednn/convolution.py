"""Convolution on oneDNN: the layouts of source, weights and destination left to the
library ("any": blocked, e.g. nChw8c on AVX2), bias and activations fused, and an
Eltwise sum that reads it (the result added into the other input's tensor)."""
from __future__ import annotations

from .op import NativeOp, Unsupported, constant, register
from .primitives import Desc, conv_pd


@register("Convolution")
class ConvolutionOp(NativeOp):
    accepts_post_ops = True
    accepts_sum = True

    def create(self, in_descs, in_shapes, out_shapes):
        k, d = self.kernel, self.d
        c, out = in_shapes[0][1], out_shapes[0]
        g = k.group
        kh, kw = k.kernel
        if g == 1:
            self.w_dims = (k.output, c, kh, kw)
        else:
            self.w_dims = (g, k.output // g, c // g, kh, kw)
        self.has_bias = k.bias is not None
        pd = conv_pd(d, self.attr(), Desc.any(d, in_shapes[0]), Desc.any(d, self.w_dims),
                     Desc.plain(d, (k.output,)) if self.has_bias else None, self.dst_hint or Desc.any(d, out),
                     k.stride, [x - 1 for x in k.dilation], k.pad, k.pad_end)
        if pd.implementation.startswith("ref"):
            raise Unsupported(f"oneDNN has only its reference convolution for {self.layer.name}")
        self.pd = pd
        return [pd.md("src_md", dims=in_shapes[0])], [pd.md("dst_md", dims=out)]

    def bind(self, ins, outs, scratch):
        k, net = self.kernel, self.network
        weights = constant(self.d, net, self.layer.id, "weights", k.weights, self.pd.md("weights_md", dims=self.w_dims))
        args = {"DNNL_ARG_SRC": ins[0], "DNNL_ARG_WEIGHTS": weights, "DNNL_ARG_DST": outs[0]}
        if self.has_bias:
            args["DNNL_ARG_BIAS"] = constant(self.d, net, self.layer.id, "biases", k.bias,
                                             Desc.plain(self.d, (k.output,)))
        return [self.primitive(self.pd, args, scratch)]
