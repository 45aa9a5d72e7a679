"""The running sum along an axis (TensorFlow's Cumsum, the CumSum layer), as numpy:
shared by the converter (constant folding) and the CPU daemon's kernel."""
from __future__ import annotations

import numpy as np


def cumsum(x: np.ndarray, axis: int, exclusive: bool = False, reverse: bool = False, dtype=None) -> np.ndarray:
    """Sums from the start of `axis` (the end when `reverse`), each without its own element when `exclusive`
    (0 first); accumulated in `dtype` (default: x's)."""
    y = np.flip(x, axis) if reverse else x
    y = np.cumsum(y, axis=axis, dtype=dtype or x.dtype)
    if exclusive:  # (each sum one place on)
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis)), np.delete(y, -1, axis)], axis)
    return np.flip(y, axis) if reverse else y
