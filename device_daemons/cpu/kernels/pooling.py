"""Pooling (max / avg), Caffe semantics.

Output size: rounding_type ceil (default) or floor; with padding the last window
must start inside the image or its left padding (Caffe, core/ops/pooling.py).
max: over the image pixels of the window (padding never wins).
avg: sum of the image pixels divided by the window clipped to the padded image
(Caffe AVE; exclude-pad="false"), or by the image pixels only (exclude-pad="true").
Vectorized and separable: the window is reduced along W, then along H. Stride 1
(the inception "3x3 pad 1" pools): a few shifted operations on the flattened
planes plus a fix of the border columns. Other strides: one strided maximum/add
over the whole batch per kernel offset, on the valid range of that offset (no
padded copy). Global pooling is a single reduction. A 3-D window (NCDHW volumes):
volume.py.
"""
from __future__ import annotations

import numpy as np

from ir.pooling import pooled_size

from . import volume
from .base import Kernel, register


@register("Pooling")
class Pooling(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs  # ranges (kernel, stride >= 1, pads >= 0) are checked by the schema
        self.kernel, self.stride, self.pad, self.pad_end = a["kernel"], a["stride"], a["pad"], a["pad_end"]
        self.method = a["pool-method"]
        self.exclude_pad = a["exclude-pad"]
        self.ceil = a["rounding_type"] == "ceil"
        self._key = None

    def _out_size(self, size) -> tuple:
        return tuple(int(o) for o in pooled_size(size, self.kernel, self.stride, self.pad, self.pad_end, self.ceil))

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1, rank=2 + len(self.kernel))
        n, c = input_shapes[0][:2]
        out = self._out_size(input_shapes[0][2:])
        if min(out) <= 0:
            raise self.error(f"input {list(input_shapes[0])} is smaller than the kernel {list(self.kernel)}")
        return [(n, c, *out)]

    def _prepare(self, h, w):
        """Per input size: output size, the valid ranges of every kernel offset and
        the avg divisors."""
        if self._key == (h, w):
            return
        self._key = (h, w)
        (kh, kw), (sh, sw), (ph, pw) = self.kernel, self.stride, self.pad
        oh, ow = self._out_size((h, w))
        self.out_hw = (oh, ow)
        self.is_global = (oh, ow) == (1, 1) and (kh, kw) == (h, w) and (ph, pw) == (0, 0)

        def ranges(o, k, s, p, size):
            # kernel offset t reads input index j*s + t - p for outputs j in [lo, hi)
            result = []
            for t in range(k):
                lo = max(0, -(-(p - t) // s))
                hi = min(o, (size - 1 - t + p) // s + 1)
                if hi > lo:
                    first = lo * s + t - p
                    result.append((lo, hi, first))
            return result
        self.rows = ranges(oh, kh, sh, ph, h)
        self.cols = ranges(ow, kw, sw, pw, w)
        if self.method == "avg":
            def counts(o, k, s, p, size, p_end):
                start = np.arange(o) * s - p
                end = np.minimum(start + k, size + p_end)
                if self.exclude_pad:
                    return np.minimum(end, size) - np.maximum(start, 0)
                return end - start
            ch = counts(oh, kh, sh, ph, h, self.pad_end[0])
            cw = counts(ow, kw, sw, pw, w, self.pad_end[1])
            self.inv_count = (1.0 / (ch[:, None] * cw[None, :]).astype(np.float64)).astype(np.float32)

    def forward(self, inputs):
        x = inputs[0]
        if len(self.kernel) == 3:
            return [volume.pooling(x, self.kernel, self.stride, self.pad, self.pad_end, self._out_size(x.shape[2:]),
                                   self.method, self.exclude_pad)]
        n, c, h, w = x.shape
        self._prepare(h, w)
        oh, ow = self.out_hw
        if self.is_global:
            flat = x.reshape(n, c, h * w)
            out = flat.max(axis=2) if self.method == "max" else flat.mean(axis=2, dtype=np.float32)
            return [out.reshape(n, c, 1, 1)]
        (sh, sw) = self.stride
        is_max = self.method == "max"
        op = np.maximum if is_max else np.add
        fill = -np.inf if is_max else 0.0
        taps_include_centre = self.pad[0] < self.kernel[0] and self.pad[1] < self.kernel[1]
        if (sh, sw) == (1, 1) and oh <= h and ow <= w and taps_include_centre:
            # (for strides > 1 the strided path below is faster than subsampling)
            out = self._dense(np.ascontiguousarray(x), op)
            if (oh, ow) != (h, w):
                out = np.ascontiguousarray(out[:, :, :oh, :ow])
            if not is_max:
                out *= self.inv_count
            return [out]
        # separable: the window along W first (into tmp), then along H
        tmp = np.empty((n, c, h, ow), np.float32)
        full = [r for r in self.cols if r[0] == 0 and r[1] == ow]
        rest = [r for r in self.cols if r not in full[:1]]
        if full:
            lo, hi, first = full[0]
            tmp[...] = x[:, :, :, first:first + sw * (ow - 1) + 1:sw]
        else:
            tmp.fill(fill)
        for lo, hi, first in rest:
            view = x[:, :, :, first:first + sw * (hi - lo - 1) + 1:sw]
            op(tmp[:, :, :, lo:hi], view, out=tmp[:, :, :, lo:hi])
        out = np.empty((n, c, oh, ow), np.float32)
        full = [r for r in self.rows if r[0] == 0 and r[1] == oh]
        rest = [r for r in self.rows if r not in full[:1]]
        if full:
            lo, hi, first = full[0]
            out[...] = tmp[:, :, first:first + sh * (oh - 1) + 1:sh]
        else:
            out.fill(fill)
        for lo, hi, first in rest:
            view = tmp[:, :, first:first + sh * (hi - lo - 1) + 1:sh]
            op(out[:, :, lo:hi], view, out=out[:, :, lo:hi])
        if not is_max:
            out *= self.inv_count
        return [out]

    def _dense(self, x, op):
        """The stride-1 result at every input position (i, j), for the window starting
        at (i - pad_y, j - pad_x). Each stage is a few shifted operations on the flattened planes
        (long contiguous runs, no per-row overhead); the columns next to the left and
        right borders, where a flat shift reads the neighbouring row, are then
        recomputed from their valid taps."""
        n, c, h, w = x.shape
        (kh, kw), (ph, pw) = self.kernel, self.pad
        flat = x.reshape(-1)
        tmp = flat.copy()
        for d in range(-pw, kw - pw):
            if d > 0:
                op(tmp[:-d], flat[d:], out=tmp[:-d])
            elif d < 0:
                op(tmp[-d:], flat[:d], out=tmp[-d:])
        tmp = tmp.reshape(n, c, h, w)
        border = sorted(set(range(min(pw, w))) | set(range(max(0, w - (kw - 1 - pw)), w)))
        for j in border:
            col = x[:, :, :, j].copy()
            for d in range(-pw, kw - pw):
                if d != 0 and 0 <= j + d < w:
                    op(col, x[:, :, :, j + d], out=col)
            tmp[:, :, :, j] = col
        out = tmp.copy()
        for d in range(-ph, kh - ph):
            if d > 0 and d < h:
                op(out[:, :, :h - d], tmp[:, :, d:], out=out[:, :, :h - d])
            elif d < 0 and -d < h:
                op(out[:, :, -d:], tmp[:, :, :h + d], out=out[:, :, -d:])
        return out
