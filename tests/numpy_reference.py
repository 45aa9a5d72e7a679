"""Independent numpy references for tests: straightforward float64 loops written
from the layer definitions, sharing no code with the CPU kernels they check."""
from __future__ import annotations

import numpy as np


def conv2d(x, w, b=None, stride=1, pad=0, dilation=1):
    """NCHW convolution, weights (O, I, kh, kw), symmetric padding, group 1."""
    x = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    w = np.asarray(w, np.float64)
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh = (h - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            y0, x0 = i * dilation, j * dilation
            patch = x[:, :, y0:y0 + stride * oh:stride, x0:x0 + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    if b is not None:
        out += np.asarray(b, np.float64).reshape(1, -1, 1, 1)
    return out


def caffe_interp(x, out_h, out_w, pad_beg=0, pad_end=0):
    """Caffe Interp's caffe_cpu_interp2, one output pixel at a time: the input cropped
    by -pad_beg/-pad_end, bilinear with corners aligned."""
    x = np.asarray(x, np.float64)
    x = x[:, :, -pad_beg:x.shape[2] + pad_end, -pad_beg:x.shape[3] + pad_end]
    n, c, h, w = x.shape
    out = np.zeros((n, c, out_h, out_w))
    rh = (h - 1) / (out_h - 1) if out_h > 1 else 0.0
    rw = (w - 1) / (out_w - 1) if out_w > 1 else 0.0
    for i in range(out_h):
        y = rh * i
        y0 = int(y)
        y1 = y0 + (1 if y0 < h - 1 else 0)
        ly = y - y0
        for j in range(out_w):
            xx = rw * j
            x0 = int(xx)
            x1 = x0 + (1 if x0 < w - 1 else 0)
            lx = xx - x0
            out[:, :, i, j] = ((1 - ly) * ((1 - lx) * x[:, :, y0, x0] + lx * x[:, :, y0, x1]) +
                               ly * ((1 - lx) * x[:, :, y1, x0] + lx * x[:, :, y1, x1]))
    return out


def relu(x):
    return np.maximum(x, 0)
