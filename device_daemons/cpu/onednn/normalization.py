"""LRN (IR Norm) and SoftMax on oneDNN.

LRN across channels is Caffe's formula as it is; within a channel, Caffe's
1 + alpha/n^2 * sum is oneDNN's within-channel mode with k = 1."""
from __future__ import annotations

from .library import DnnlError
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
        src = self.follow(in_descs[0], in_shapes[0])
        if k.region == "across":
            alg, bias = "across_channels", k.k
        else:
            alg, bias = "within_channel", 1.0
        self.pd = lrn_pd(d, self.attr(), alg, src, Desc.any(d, in_shapes[0], self.dt), k.size, k.alpha, k.beta, bias)
        return [src], [self.pd.md("dst_md", dims=out_shapes[0])]


@register("SoftMax", "Softmax")
class SoftMaxOp(_SameLayout):
    inplace = True

    def create(self, in_descs, in_shapes, out_shapes):
        d = self.d
        rank = len(in_shapes[0])
        axis = self.kernel.axis + rank if self.kernel.axis < 0 else self.kernel.axis
        given = self.follow(in_descs[0], in_shapes[0])
        plain = Desc.plain(d, in_shapes[0], self.dt)
        # its input's layout, else plain where oneDNN has only its reference code for that one
        for src in (given, plain) if given != plain else (given,):
            # a network output is written plain f32 (no reorder after it)
            for dst in ([Desc.plain(d, in_shapes[0])] if self.out_f32 else []) + [src]:
                try:
                    self.pd = softmax_pd(d, self.attr(), src, dst, axis)
                except DnnlError:
                    continue
                if not self.pd.implementation.startswith("ref") or src is plain:
                    self.inplace = dst is src
                    return [src], [self.pd.md("dst_md", dims=in_shapes[0])]
        return [src], [self.pd.md("dst_md", dims=in_shapes[0])]
