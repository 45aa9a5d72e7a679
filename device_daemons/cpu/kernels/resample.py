"""Resample: nearest or bilinear resizing of the H, W axes.

Output size: H*factor, W*factor (truncated) when the IR's ports say the factor
made them, else the fixed height/width attributes. NEAREST takes source pixel
floor(y * H_in / H_out); LINEAR is bilinear with half-pixel centres
(src = (dst + 0.5) * in/out - 0.5, clamped at the borders), as OpenCV INTER_LINEAR.
"""
from __future__ import annotations

import numpy as np

from .base import Kernel, register

_TYPES = {"caffe.ResampleParameter.NEAREST": "nearest", "caffe.ResampleParameter.LINEAR": "linear"}


@register("Resample")
class Resample(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        kind = self.attrs["type"]
        if kind not in _TYPES:
            raise self.error(f"resample type {kind!r} is not supported; the CPU plugin implements NEAREST and "
                             "LINEAR")
        self.kind = _TYPES[kind]
        self.antialias = self.attrs["antialias"]
        self.factor = self.attrs["factor"]
        self.height = self.attrs["height"]
        self.width = self.attrs["width"]
        self.use_factor = self.factor > 0
        if self.use_factor and self.height and self.width and layer.inputs and layer.outputs:
            ih, iw = layer.inputs[0].dims[2:4]
            oh, ow = layer.outputs[0].dims[2:4]
            self.use_factor = (oh, ow) == (int(ih * self.factor), int(iw * self.factor))
        if not self.use_factor and not (self.height > 0 and self.width > 0):
            raise self.error("needs a positive factor or positive height and width")
        self._key = None

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1, rank=4)
        n, c, h, w = input_shapes[0]
        if self.use_factor:
            oh, ow = int(h * self.factor), int(w * self.factor)
        else:
            oh, ow = self.height, self.width
        if oh <= 0 or ow <= 0:
            raise self.error(f"output size {oh}x{ow} is empty for input {list(input_shapes[0])}")
        if self.antialias and (oh < h or ow < w):
            raise self.error("antialias downscaling is not supported by the CPU plugin")
        return [(n, c, oh, ow)]

    def _maps(self, h, w, oh, ow):
        key = (h, w, oh, ow)
        if self._key == key:
            return self._cached
        if self.kind == "nearest":
            ys = np.minimum(np.floor(np.arange(oh) * (h / oh)).astype(np.int64), h - 1)
            xs = np.minimum(np.floor(np.arange(ow) * (w / ow)).astype(np.int64), w - 1)
            maps = (ys, xs)
        else:
            def axis(o, i):
                src = (np.arange(o) + 0.5) * (i / o) - 0.5
                src = np.maximum(src, 0.0)
                i0 = np.minimum(np.floor(src).astype(np.int64), i - 1)
                i1 = np.minimum(i0 + 1, i - 1)
                frac = (src - i0).astype(np.float32)
                frac[i0 == i - 1] = 0.0
                return i0, i1, frac
            maps = (axis(oh, h), axis(ow, w))
        self._key, self._cached = key, maps
        return maps

    def forward(self, inputs):
        x = inputs[0]
        n, c, h, w = x.shape
        _, _, oh, ow = self.getMemoryShapes([x.shape])[0]
        if self.kind == "nearest":
            ys, xs = self._maps(h, w, oh, ow)
            return [x[:, :, ys][:, :, :, xs]]
        (y0, y1, fy), (x0, x1, fx) = self._maps(h, w, oh, ow)
        top = x[:, :, y0]
        bottom = x[:, :, y1]
        fy = fy[:, None]
        rows = top + (bottom - top) * fy  # (n, c, oh, w)
        left = rows[:, :, :, x0]
        right = rows[:, :, :, x1]
        return [(left + (right - left) * fx).astype(np.float32, copy=False)]
