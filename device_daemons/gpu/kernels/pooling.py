"""Pooling on the GPU (pooling.cl): max and avg, Caffe's rounding and padding
rules (the output size comes from the CPU kernel), global pooling included."""
from __future__ import annotations

from .base import GpuKernel, i32, register, round_up


@register("Pooling")
class Pooling(GpuKernel):
    program = "pooling.cl"

    def launches(self, ins, outs):
        ref = self.ref
        n, c, h, w = self.in_shapes[0]
        _, _, oh, ow = self.out_shapes[0]
        (kh, kw), (sh, sw), (ph, pw), (phe, pwe) = ref.kernel, ref.stride, ref.pad, ref.pad_end
        args = [ins[0], outs[0]] + i32(h, w, oh, ow, kh, kw, sh, sw, ph, pw, phe, pwe, ref.method == "max",
                                       ref.exclude_pad)
        return [self.launch("pool", args, (round_up(ow, 8), oh, n * c))]
