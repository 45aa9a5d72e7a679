"""Pooling's output size: semantics shared by the producer (core) and the consumers
(daemons) of IR, as Caffe computes it."""
from __future__ import annotations

import numpy as np


def pooled_size(size, kernel, stride, pad, pad_end, ceil: bool) -> np.ndarray:
    """Output sizes per spatial axis (arrays of the axes). Caffe's ceil rounding: when any
    padding is set, on every axis the last window must start inside the image or its
    begin padding, else it is dropped (Caffe checks `pad_h || pad_w`, then each axis;
    an axis without padding of its own is clipped too). Floor rounding (TensorFlow's
    SAME/VALID, whose end padding may differ from the begin) drops nothing."""
    size, kernel, stride, pad, pad_end = (np.asarray(v, dtype=np.int64) for v in (size, kernel, stride, pad, pad_end))
    span = size + pad + pad_end - kernel
    if not ceil:
        return span // stride + 1
    out = -(-span // stride) + 1
    if np.any(pad > 0):
        out = np.where((out - 1) * stride >= size + pad, out - 1, out)
    return out
