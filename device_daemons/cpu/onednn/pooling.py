"""Pooling on oneDNN, Caffe's semantics (device_daemons/cpu/kernels/pooling.py):
the output size (ceil rounding) is given by padding the end so that oneDNN's floor
formula lands on it. Max pooling never takes padding; average pooling divides by
the window clipped to the declared padding (exclude-pad false) or to the image
(exclude-pad true): oneDNN's include-padding mode matches the first only where the
ceil rounding adds no padding beyond the declared one, else the layer stays numpy."""
from __future__ import annotations

from .op import NativeOp, Unsupported, register
from .primitives import Desc, pooling_pd


def end_padding(size, out, kernel, stride, pad):
    """The end padding for which floor((size + pad + end - kernel) / stride) + 1 == out."""
    return max(0, (out - 1) * stride + kernel - size - pad)


@register("Pooling")
class PoolingOp(NativeOp):
    def create(self, in_descs, in_shapes, out_shapes):
        k, d = self.kernel, self.d
        pad_r = [end_padding(size, out, kernel, stride, pad) for size, out, kernel, stride, pad
                 in zip(in_shapes[0][2:], out_shapes[0][2:], k.kernel, k.stride, k.pad)]
        if k.method == "max":
            alg = "max"
        elif k.exclude_pad:
            alg = "avg_exclude_padding"
        else:
            alg = "avg_include_padding"
            if any(r > e for r, e in zip(pad_r, k.pad_end)):
                raise Unsupported("average pooling whose ceil rounding pads beyond the declared padding")
        src = self.follow(in_descs[0], in_shapes[0])
        self.pd = pooling_pd(d, self.attr(), alg, src, Desc.any(d, out_shapes[0], self.dt), k.stride, k.kernel, k.pad,
                             pad_r)
        return [src], [self.pd.md("dst_md", dims=out_shapes[0])]

    def bind(self, ins, outs, scratch):
        return [self.primitive(self.pd, {"DNNL_ARG_SRC": ins[0], "DNNL_ARG_DST": outs[0]}, scratch)]
