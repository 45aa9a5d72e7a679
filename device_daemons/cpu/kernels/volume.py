"""3-D Convolution and Pooling on numpy (NCDHW volumes; the Convolution and Pooling kernels call these when
their window has three axes).

Each kernel offset reads one strided view of the padded volume: the convolution copies the views into a
column buffer (channels x offsets x outputs, built a slab of output planes at a time so that it stays under
COLUMN_BYTES) and multiplies it by the weights per group in one BLAS call; pooling reduces the views with
maximum / add (padding -inf / 0, never winning a max), the average divided per output by the window clipped
to the padded volume (Caffe) or to the volume (exclude-pad), per axis as the 2-D kernel does."""
from __future__ import annotations

import numpy as np

COLUMN_BYTES = 64 << 20


def padded(x, pad, need, fill: float):
    """`x` (N, C, *spatial) with `pad` before each spatial axis and cut or filled up to `need` values on it."""
    widths = [(0, 0), (0, 0)] + [(p, max(0, n - s - p)) for s, p, n in zip(x.shape[2:], pad, need)]
    out = np.pad(x, widths, constant_values=fill) if any(any(w) for w in widths) else x
    return out[(slice(None), slice(None), *(slice(0, n) for n in need))]


def _offsets(kernel):
    return np.ndindex(*(int(k) for k in kernel))


def _view(xp, offset, dilation, stride, out, first=0, count=None):
    """The values each output reads at this kernel offset; output planes [first, first + count) on axis 2."""
    count = out[0] if count is None else count
    index = [slice(None), slice(None)]
    for axis, (t, d, s, o) in enumerate(zip(offset, dilation, stride, out)):
        start = t * d + (first * s if axis == 0 else 0)
        n = count if axis == 0 else o
        index.append(slice(start, start + s * (n - 1) + 1, s))
    return xp[tuple(index)]


def convolution(x, weights, bias, kernel, stride, pad, dilation, out):
    """x (N, C, D, H, W); weights (groups, O/g, C/g * kd*kh*kw) in (channel, kd, kh, kw) order; bias (O,) or None;
    `out`: the output's (D, H, W). Returns (N, O, *out) float32."""
    n, c = x.shape[:2]
    groups, per_group, _ = weights.shape
    extent = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    xp = padded(x, pad, [(o - 1) * s + e for o, s, e in zip(out, stride, extent)], 0.0)
    taps = int(np.prod(kernel))
    plane = out[1] * out[2]
    slab = max(1, min(out[0], COLUMN_BYTES // max(1, c * taps * plane * 4)))
    y = np.empty((n, groups, per_group, out[0] * plane), np.float32)
    for first in range(0, out[0], slab):
        count = min(slab, out[0] - first)
        col = np.empty((n, c, taps, count, out[1], out[2]), np.float32)
        for t, offset in enumerate(_offsets(kernel)):
            col[:, :, t] = _view(xp, offset, dilation, stride, out, first, count)
        col = col.reshape(n, groups, (c // groups) * taps, count * plane)
        np.matmul(weights, col, out=y[..., first * plane:(first + count) * plane])
    y = y.reshape(n, groups * per_group, *out)
    if bias is not None:
        y += bias.reshape(1, -1, 1, 1, 1)
    return y


def _divisors(size, kernel, stride, pad, pad_end, out, exclude_pad):
    """1 / (the number of values each output's window averages), (D, H, W)."""
    counts = []
    for s, k, st, p, pe, o in zip(size, kernel, stride, pad, pad_end, out):
        start = np.arange(o) * st - p
        end = np.minimum(start + k, s + pe)
        counts.append(np.minimum(end, s) - np.maximum(start, 0) if exclude_pad else end - start)
    total = counts[0][:, None, None] * counts[1][None, :, None] * counts[2][None, None, :]
    return (1.0 / total.astype(np.float64)).astype(np.float32)


def pooling(x, kernel, stride, pad, pad_end, out, method: str, exclude_pad: bool):
    """Max or average pooling of x (N, C, D, H, W) to (N, C, *out)."""
    is_max = method == "max"
    xp = padded(x, pad, [(o - 1) * s + k for o, s, k in zip(out, stride, kernel)], -np.inf if is_max else 0.0)
    ones = (1, 1, 1)
    result = None
    for offset in _offsets(kernel):
        view = _view(xp, offset, ones, stride, out)
        if result is None:
            result = view.copy()
        elif is_max:
            np.maximum(result, view, out=result)
        else:
            result += view
    if not is_max:
        result *= _divisors(x.shape[2:], kernel, stride, pad, pad_end, out, exclude_pad)
    return result  # (the first view's copy: contiguous float32)


def deconvolution(x, weights_t, output: int, bias, kernel, stride, pad, dilation, out):
    """The transposed convolution of x (N, C, D, H, W): weights_t (groups, O/g * kd*kh*kw, C/g) (Caffe's
    (C, O/g, kd, kh, kw) per group, transposed); each input value spreads over its kernel window (col2im: one
    strided add a kernel offset), the begin padding cropped off to `out`. Returns (N, O, *out) float32."""
    n, c, *size = x.shape
    groups = weights_t.shape[0]
    full = [s * (i - 1) + d * (k - 1) + 1 for i, s, d, k in zip(size, stride, dilation, kernel)]
    y = np.empty((n, output, *out), np.float32)
    crop = tuple(slice(p, p + o) for p, o in zip(pad, out))
    for i in range(n):
        col = np.matmul(weights_t, x[i].reshape(groups, c // groups, -1)).reshape(output, *kernel, *size)
        acc = np.zeros((output, *full), np.float32)
        for offset in _offsets(kernel):
            index = tuple(slice(t * d, t * d + s * (m - 1) + 1, s)
                          for t, d, s, m in zip(offset, dilation, stride, size))
            acc[(slice(None), *index)] += col[(slice(None), *offset)]
        y[i] = acc[(slice(None), *crop)]
    if bias is not None:
        y += bias.reshape(1, -1, 1, 1, 1)
    return y
