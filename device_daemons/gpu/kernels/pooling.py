"""Pooling on the GPU (pooling.cl): max and avg, Caffe's rounding and padding
rules (the output size comes from the CPU kernel), global pooling included; a
3-D window over NCDHW volumes: volume.cl's pool3d, the same rules per axis."""
from __future__ import annotations

from .base import GpuKernel, i32, register, round_up


@register("Pooling")
class Pooling(GpuKernel):
    program = "pooling.cl"

    def launches(self, ins, outs):
        ref = self.ref
        if len(ref.kernel) == 3:
            return self._volume_launches(ins, outs)
        n, c, h, w = self.in_shapes[0]
        _, _, oh, ow = self.out_shapes[0]
        (kh, kw), (sh, sw), (ph, pw), (phe, pwe) = ref.kernel, ref.stride, ref.pad, ref.pad_end
        args = [ins[0], outs[0]] + i32(h, w, oh, ow, kh, kw, sh, sw, ph, pw, phe, pwe, ref.method == "max",
                                       ref.exclude_pad)
        return [self.launch("pool", args, (round_up(ow, 8), oh, n * c))]

    def _volume_launches(self, ins, outs):
        ref = self.ref
        n, c, d, h, w = self.in_shapes[0]
        _, _, od, oh, ow = self.out_shapes[0]
        window = [v for axis in (ref.kernel, ref.stride, ref.pad, ref.pad_end) for v in axis]
        args = [ins[0], outs[0]] + i32(d, h, w, od, oh, ow, *window, ref.method == "max", ref.exclude_pad)
        return [self.launch("pool3d", args, (round_up(ow, 8), od * oh, n * c), program=self.ctx.program("volume.cl"))]
