"""Interpolate (own type, core/ops/interpolate.py): TensorFlow's resize_bilinear and
resize_nearest_neighbor coordinate rules, computed in float32 as TensorFlow does
(so a nearest pixel on a boundary is the one TensorFlow picks), and resize_bicubic:
ir/cubic.py's per-axis weights as two matrix products."""
from __future__ import annotations

import numpy as np

from ir.cubic import cubic_matrix

from .base import Kernel, register


def _scale(size_in, size_out, align_corners):
    if align_corners and size_out > 1:
        return np.float32(size_in - 1) / np.float32(size_out - 1)
    return np.float32(size_in) / np.float32(size_out)


def nearest_indices(size_in, size_out, align_corners, half_pixel):
    scale = _scale(size_in, size_out, align_corners)
    i = np.arange(size_out, dtype=np.float32)
    src = (i + np.float32(0.5)) * scale if half_pixel else i * scale
    idx = np.floor(src)
    if align_corners:  # roundf: halves away from zero (coordinates are >= 0 here)
        idx += (src - idx) >= np.float32(0.5)
    return np.clip(idx.astype(np.int64), 0, size_in - 1)


def linear_weights(size_in, size_out, align_corners, half_pixel):
    scale = _scale(size_in, size_out, align_corners)
    i = np.arange(size_out, dtype=np.float32)
    src = (i + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel else i * scale
    low = np.floor(src)
    lower = np.maximum(low.astype(np.int64), 0)
    upper = np.minimum(np.ceil(src).astype(np.int64), size_in - 1)
    return lower, upper, (src - low).astype(np.float32)


@register("Interpolate")
class Interpolate(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.mode, self.align_corners, self.half_pixel = a["mode"], a["align_corners"], a["half_pixel_centers"]
        self.height, self.width = a["height"], a["width"]
        self._key = None

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1, rank=4)
        n, c, _, _ = input_shapes[0]
        return [(n, c, self.height, self.width)]

    def _maps(self, h, w):
        if self._key != (h, w):
            args = (self.align_corners, self.half_pixel)
            if self.mode == "nearest":
                self._cached = (nearest_indices(h, self.height, *args), nearest_indices(w, self.width, *args))
            elif self.mode == "cubic":  # (the rows' matrix, the columns' transposed)
                self._cached = (cubic_matrix(h, self.height, *args), cubic_matrix(w, self.width, *args).T.copy())
            else:
                self._cached = (linear_weights(h, self.height, *args), linear_weights(w, self.width, *args))
            self._key = (h, w)
        return self._cached

    def forward(self, inputs):
        x = inputs[0]
        ys, xs = self._maps(x.shape[2], x.shape[3])
        if self.mode == "nearest":
            return [x[:, :, ys][:, :, :, xs]]
        if self.mode == "cubic":
            return [np.matmul(np.matmul(ys, x), xs)]
        (y0, y1, fy), (x0, x1, fx) = ys, xs
        top_left, top_right = x[:, :, y0][:, :, :, x0], x[:, :, y0][:, :, :, x1]
        bottom_left, bottom_right = x[:, :, y1][:, :, :, x0], x[:, :, y1][:, :, :, x1]
        top = top_left + (top_right - top_left) * fx
        bottom = bottom_left + (bottom_right - bottom_left) * fx
        return [(top + (bottom - top) * fy[:, None]).astype(np.float32, copy=False)]
