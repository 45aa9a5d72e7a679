"""Resample (nearest, bilinear with half-pixel centres), Interp (Caffe's, corners
aligned, its crop) and Interpolate (TensorFlow's coordinate rules): resize.cl, the
CPU kernels' resize.py and interpolate.py families. The per-axis maps are the CPU
kernels' own (source indices and weights, in float32 as they compute them), uploaded
once per shape; the device blends the four source pixels of each output value (sixteen
for TensorFlow's bicubic: ir/cubic.py's four taps a row and a column)."""
from __future__ import annotations

import numpy as np

from ir.cubic import cubic_taps

from .base import GpuKernel, i32, register, round_up


def _pairs(lo, hi=None, frac=None, offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) interleaved as int32 (+ offset) and the weights (zeros for nearest)."""
    hi = lo if hi is None else hi
    pairs = np.stack([np.asarray(lo, np.int64), np.asarray(hi, np.int64)], axis=1) + offset
    weights = np.zeros(len(pairs), np.float32) if frac is None else np.asarray(frac, np.float32)
    return pairs.astype(np.int32).ravel(), weights


@register("Resample", "Interp", "Interpolate")
class Resize(GpuKernel):
    program = "resize.cl"

    def _cubic(self) -> bool:
        return self.layer.type == "Interpolate" and self.ref.mode == "cubic"

    def _maps(self, h: int, w: int, oh: int, ow: int):
        """((ys, fy), (xs, fx)) of the CPU kernel (cubic: four indices and weights an output position)."""
        ref, kind = self.ref, self.layer.type
        if self._cubic():
            args = (ref.align_corners, ref.half_pixel)
            return tuple((idx.astype(np.int32).ravel(), wt.ravel()) for idx, wt in (
                cubic_taps(h, oh, *args), cubic_taps(w, ow, *args)))
        if kind == "Interp":  # (its crop: pad_beg / pad_end <= 0 take rows and columns off the input)
            beg, end = -ref.attrs["pad_beg"], -ref.attrs["pad_end"]
            return (_pairs(*ref._axis(h - beg - end, oh), offset=beg), _pairs(*ref._axis(w - beg - end, ow),
                                                                                offset=beg))
        maps = ref._maps(h, w, oh, ow) if kind == "Resample" else ref._maps(h, w)
        nearest = (ref.kind if kind == "Resample" else ref.mode) == "nearest"
        if nearest:
            return _pairs(maps[0]), _pairs(maps[1])
        return _pairs(*maps[0]), _pairs(*maps[1])

    def configure(self, in_shapes, out_shapes):
        super().configure(in_shapes, out_shapes)
        _, _, h, w = self.in_shapes[0]
        oh, ow = self.out_shapes[0][2:4]
        (ys, fy), (xs, fx) = self._maps(h, w, oh, ow)
        # (kept here: a launch's arguments must outlive it)
        self._buffers = (self.ctx.upload_ints(ys), self.ctx.upload(fy, np.float32), self.ctx.upload_ints(xs),
                         self.ctx.upload(fx, np.float32))

    def launches(self, ins, outs):
        _, _, h, w = self.in_shapes[0]
        oh, ow = self.out_shapes[0][2:4]
        count = int(np.prod(self.out_shapes[0]))
        return [self.launch("resize_cubic" if self._cubic() else "resize_maps",
                            [ins[0], outs[0], *self._buffers] + i32(h, w, oh, ow, count), (round_up(count, 64),))]
