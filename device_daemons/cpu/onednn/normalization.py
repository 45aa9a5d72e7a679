"""LRN (IR Norm) and SoftMax on oneDNN.

LRN across channels is Caffe's formula as it is; within a channel, Caffe's
1 + alpha/n^2 * sum is oneDNN's within-channel mode with k = 1."""
from __future__ import annotations

from .op import NativeOp, register
from .primitives import Desc, lrn_pd, softmax_pd


class _SameLayout(NativeOp):
    """One input, one output of the same dims, in whatever layout the input has."""

    def bind(self, ins, outs, scratch):
        return [self.primitive(self.pd, {"DNNL_ARG_SRC": ins[0], "DNNL_ARG_DST": outs[0]}, scratch)]


@register("Norm", "LRN")
class LrnOp(_SameLayout):
    def create(self, in_descs, in_shapes, out_shapes):
        k, d = self.kernel, self.d
        src = in_descs[0] or Desc.plain(d, in_shapes[0])
        if k.region == "across":
            alg, bias = "across_channels", k.k
        else:
            alg, bias = "within_channel", 1.0
        self.pd = lrn_pd(d, self.attr(), alg, src, Desc.any(d, in_shapes[0]), k.size, k.alpha, k.beta, bias)
        return [src], [self.pd.md("dst_md", dims=out_shapes[0])]


@register("SoftMax", "Softmax")
class SoftMaxOp(_SameLayout):
    inplace = True

    def create(self, in_descs, in_shapes, out_shapes):
        d = self.d
        rank = len(in_shapes[0])
        axis = self.kernel.axis + rank if self.kernel.axis < 0 else self.kernel.axis
        src = in_descs[0] or Desc.plain(d, in_shapes[0])
        self.pd = softmax_pd(d, self.attr(), src, src, axis)
        return [src], [src]
