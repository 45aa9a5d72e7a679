"""Convolution and Deconvolution.

Convolution: im2col (one strided copy per kernel offset into a reused column
buffer) + one BLAS sgemm per image (groups as one batched matmul); 1x1 stride-1
unpadded convolutions are a direct matmul with no im2col.
Weights: Convolution (O, I/g, kh, kw) flat, pre-reshaped once to (g, O/g, I/g*kh*kw).
Deconvolution keeps Caffe's (C_in, C_out/g, kh, kw): sgemm W^T x per group, then
col2im (one strided add per kernel offset) and the padding cropped off.
A 3-D window (NCDHW volumes) runs the same way in volume.py.
"""
from __future__ import annotations

import numpy as np

from . import volume
from .base import Kernel, register


def _conv_params(k: Kernel):
    a = k.attrs  # ranges (kernel, stride, dilation >= 1, pads >= 0) are checked by the schema
    k.kernel, k.stride, k.pad, k.pad_end = a["kernel"], a["stride"], a["pad"], a["pad_end"]
    k.dilation, k.group, k.output = a["dilation"], a["group"], a["output"]
    if k.output % k.group:
        raise k.error(f"output {k.output} must be a positive multiple of group {k.group}")
    k.spatial = len(k.kernel)  # 2, or 3 for a volume


def _out_size(k: Kernel, size, transposed: bool = False) -> tuple:
    """The output's spatial size for an input's (any number of axes)."""
    out = []
    for i, n in enumerate(size):
        extent = k.dilation[i] * (k.kernel[i] - 1) + 1
        if transposed:
            out.append(k.stride[i] * (n - 1) + extent - k.pad[i] - k.pad_end[i])
        else:
            out.append((n + k.pad[i] + k.pad_end[i] - extent) // k.stride[i] + 1)
    return tuple(out)


@register("Convolution")
class Convolution(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        _conv_params(self)
        taps = int(np.prod(self.kernel))
        w = self.blob("weights")
        per_out = w.size // self.output
        if per_out * self.output != w.size or per_out % taps:
            raise self.error(f"has {w.size} weights, which is not output {self.output} x input channels x "
                             f"kernel {'x'.join(map(str, self.kernel))}")
        self.in_per_group = per_out // taps
        g = self.group
        self.weights = np.ascontiguousarray(w.reshape(g, self.output // g, per_out))
        self.weights2d = self.weights.reshape(self.output, per_out)
        b = self.blob("biases", required=False, size=self.output)
        self.bias = None if b is None else b.reshape(1, self.output, 1)
        self.pointwise = (self.spatial == 2 and self.kernel == (1, 1) and self.pad == (0, 0)
                          and self.pad_end == (0, 0) and g == 1)
        self._scratch_key = None
        self._res = None

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1, rank=2 + self.spatial)
        n, c = input_shapes[0][:2]
        if c != self.in_per_group * self.group:
            raise self.error(f"input has {c} channels but the weights need {self.in_per_group * self.group} "
                             f"({self.in_per_group} per group x {self.group} groups)")
        out = _out_size(self, input_shapes[0][2:])
        if min(out) <= 0:
            raise self.error(f"input {list(input_shapes[0])} is smaller than the kernel {list(self.kernel)}")
        return [(n, self.output, *out)]

    def _scratch(self, c, h, w, oh, ow):
        """Reused per input size: the zero-bordered input plane and the column buffer."""
        key = (c, h, w)
        if self._scratch_key != key:
            (kh, kw), (sh, sw), dw = self.kernel, self.stride, self.dilation[1]
            hp, wp = h + self.pad[0] + self.pad_end[0], w + self.pad[1] + self.pad_end[1]
            # stride 1: every kernel offset is one contiguous run of oh*wp values per
            # channel of the flattened padded plane (the wp-ow columns past each row
            # are junk, dropped after the matmul); extra rows keep the runs in bounds
            self._flat = (sh, sw) == (1, 1)
            if self._flat:
                extra = -(-(dw * (kw - 1)) // wp) if kw > 1 else 0
                self._padded = np.zeros((c, hp + extra, wp), np.float32)
                self._col = np.empty((c, kh, kw, oh * wp), np.float32)
                self._wp = wp
            else:
                self._padded = np.zeros((c, hp, wp), np.float32) if (hp, wp) != (h, w) else None
                self._col = np.empty((c, kh, kw, oh, ow), np.float32)
            self._scratch_key = key
        return self._padded, self._col

    def _im2col(self, src, h, w, oh, ow):
        padded, col = self._scratch(src.shape[0], h, w, oh, ow)
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        ph, pw = self.pad
        if padded is not None:
            padded[:, ph:ph + h, pw:pw + w] = src
            src = padded
        if self._flat:
            c = src.shape[0]
            flat = src.reshape(c, -1)
            run = oh * self._wp
            for ky in range(kh):
                for kx in range(kw):
                    start = ky * dh * self._wp + kx * dw
                    col[:, ky, kx] = flat[:, start:start + run]
            return col.reshape(-1, run)
        hspan, wspan = sh * (oh - 1) + 1, sw * (ow - 1) + 1
        for ky in range(kh):
            y0 = ky * dh
            rows = src[:, y0:y0 + hspan:sh]
            for kx in range(kw):
                x0 = kx * dw
                col[:, ky, kx] = rows[:, :, x0:x0 + wspan:sw]
        return col.reshape(-1, oh * ow)

    def forward(self, inputs):
        x = inputs[0]
        if self.spatial == 3:
            bias = None if self.bias is None else self.bias.ravel()
            return [volume.convolution(x, self.weights, bias, self.kernel, self.stride, self.pad, self.dilation,
                                       _out_size(self, x.shape[2:]))]
        n, c, h, w = x.shape
        oh, ow = _out_size(self, (h, w))
        o, m = self.output, oh * ow
        if self.pointwise:
            (sh, sw) = self.stride
            if (sh, sw) != (1, 1):
                x = x[:, :, ::sh, ::sw][:, :, :oh, :ow]
            x3 = x.reshape(n, c, m)  # copies only when strided
            out = np.matmul(self.weights2d, x3)
            if self.bias is not None:
                out += self.bias
            return [out.reshape(n, o, oh, ow)]
        out = np.empty((n, o, oh, ow), np.float32)
        g = self.group
        for i in range(n):
            col = self._im2col(x[i], h, w, oh, ow)
            cols = col.shape[1]
            if self._res is None or self._res.shape[1] != cols:
                self._res = np.empty((o, cols), np.float32)
            res = self._res
            if g == 1:
                np.dot(self.weights2d, col, out=res)
            else:
                np.matmul(self.weights, col.reshape(g, -1, cols), out=res.reshape(g, o // g, cols))
            if cols != m:  # drop the junk columns of the flat layout
                res = res.reshape(o, oh, -1)[:, :, :ow]
            res = res.reshape(o, oh, ow)
            if self.bias is not None:
                np.add(res, self.bias.reshape(o, 1, 1), out=out[i])
            else:
                out[i] = res
        return [out]


@register("Deconvolution")
class Deconvolution(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        _conv_params(self)
        w = self.blob("weights")
        g = self.group
        per_in = (self.output // g) * int(np.prod(self.kernel))  # weights per input channel
        if w.size % per_in:
            raise self.error(f"has {w.size} weights, which is not input channels x output {self.output}/group "
                             f"{g} x kernel {'x'.join(map(str, self.kernel))}")
        self.in_channels = w.size // per_in
        if self.in_channels % g:
            raise self.error(f"{self.in_channels} input channels cannot be split into {g} groups")
        cin_g = self.in_channels // g
        # (C_in, C_out/g*kh*kw) -> per group transposed: (g, C_out/g*kh*kw, C_in/g)
        self.weights_t = np.ascontiguousarray(w.reshape(g, cin_g, per_in).transpose(0, 2, 1))
        b = self.blob("biases", required=False, size=self.output)
        self.bias = None if b is None else b.reshape(self.output, 1, 1)

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1, rank=2 + self.spatial)
        n, c = input_shapes[0][:2]
        if c != self.in_channels:
            raise self.error(f"input has {c} channels but the weights need {self.in_channels}")
        out = _out_size(self, input_shapes[0][2:], transposed=True)
        if min(out) <= 0:
            raise self.error(f"padding {list(self.pad)} leaves no output for input {list(input_shapes[0])}")
        return [(n, self.output, *out)]

    def forward(self, inputs):
        x = inputs[0]
        if self.spatial == 3:
            bias = None if self.bias is None else self.bias.ravel()
            return [volume.deconvolution(x, self.weights_t, self.output, bias, self.kernel, self.stride, self.pad,
                                         self.dilation, _out_size(self, x.shape[2:], transposed=True))]
        n, c, h, w = x.shape
        g = self.group
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        hp = sh * (h - 1) + dh * (kh - 1) + 1
        wp = sw * (w - 1) + dw * (kw - 1) + 1
        oh, ow = _out_size(self, (h, w), transposed=True)
        ph, pw = self.pad
        out = np.empty((n, self.output, oh, ow), np.float32)
        hspan, wspan = sh * (h - 1) + 1, sw * (w - 1) + 1
        for i in range(n):
            col = np.matmul(self.weights_t, x[i].reshape(g, c // g, h * w))  # (g, oc_g*kh*kw, h*w)
            col = col.reshape(self.output, kh, kw, h, w)
            acc = np.zeros((self.output, hp, wp), np.float32)
            for ky in range(kh):
                y0 = ky * dh
                for kx in range(kw):
                    x0 = kx * dw
                    acc[:, y0:y0 + hspan:sh, x0:x0 + wspan:sw] += col[:, ky, kx]
            out[i] = acc[:, ph:ph + oh, pw:pw + ow]
        if self.bias is not None:
            out += self.bias
        return [out]
