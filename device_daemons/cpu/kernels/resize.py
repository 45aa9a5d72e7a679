"""Resizing of the H, W axes: Resample (nearest or bilinear) and Interp (Caffe's
PSPNet/DeepLab bilinear resize with corners aligned).

Output size: H*factor, W*factor (truncated) when the IR's ports say the factor
made them, else the fixed height/width attributes. NEAREST takes source pixel
floor(y * H_in / H_out); LINEAR is bilinear with half-pixel centres
(src = (dst + 0.5) * in/out - 0.5, clamped at the borders), as OpenCV INTER_LINEAR.
"""
from __future__ import annotations

import numpy as np

from ir.interp import interp_output_size

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


@register("Interp")
class Interp(Kernel):
    """Caffe's Interp: the input cropped by pad_beg/pad_end (both <= 0), resized
    bilinearly with corners aligned to the size of ir/interp.py's rules (or of the
    second input's H, W). Source coordinate of output row i: i * (H_in - 1) / (H_out - 1),
    computed in float32 as Caffe does."""

    def __init__(self, layer):
        super().__init__(layer)
        if not self.attrs["align_corners"]:
            raise self.error("align_corners 0 is not supported by the CPU plugin (Caffe's Interp aligns corners)")
        self._key = None

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, (1, 2), rank=4)
        n, c, h, w = input_shapes[0]
        if len(input_shapes) == 2:
            if len(input_shapes[1]) != 4:
                raise self.error(f"the size input must be 4-D, got {list(input_shapes[1])}")
            return [(n, c, input_shapes[1][2], input_shapes[1][3])]
        a = self.attrs
        try:
            oh, ow = interp_output_size(h, w, height=a["height"], width=a["width"], zoom_factor=a["zoom_factor"],
                                        shrink_factor=a["shrink_factor"], pad_beg=a["pad_beg"], pad_end=a["pad_end"],
                                        zoom_rule=a["zoom_rule"])
        except ValueError as exc:
            raise self.error(f"input {list(input_shapes[0])}: {exc}") from None
        return [(n, c, oh, ow)]

    @staticmethod
    def _axis(size_in, size_out):
        f32 = np.float32
        ratio = f32(size_in - 1) / f32(size_out - 1) if size_out > 1 else f32(0)
        src = ratio * np.arange(size_out, dtype=np.float32)
        lo = src.astype(np.int64)  # truncation, as Caffe's (int) cast
        hi = np.where(lo < size_in - 1, lo + 1, lo)
        frac = (src - lo).astype(np.float32)
        return lo, hi, frac

    def forward(self, inputs):
        x = inputs[0]
        n, c, oh, ow = self.getMemoryShapes([t.shape for t in inputs])[0]
        beg, end = -self.attrs["pad_beg"], -self.attrs["pad_end"]
        x = x[:, :, beg:x.shape[2] - end, beg:x.shape[3] - end]
        h, w = x.shape[2], x.shape[3]
        key = (h, w, oh, ow)
        if self._key != key:
            self._maps, self._key = (self._axis(h, oh), self._axis(w, ow)), key
        (y0, y1, fy), (x0, x1, fx) = self._maps
        fy = fy[:, None]
        rows = x[:, :, y0] * (np.float32(1) - fy) + x[:, :, y1] * fy
        out = rows[:, :, :, x0] * (np.float32(1) - fx) + rows[:, :, :, x1] * fx
        return [out.astype(np.float32, copy=False)]

