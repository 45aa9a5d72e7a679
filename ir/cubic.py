"""TensorFlow's bicubic resize (resize_bicubic / tf.image.resize(method="bicubic")) per axis, as its kernel
computes it, shared by the CPU and GPU kernels and the IR v11 writer: the source coordinate in float32 (half-pixel
centres or not, corners aligned or not), four taps around it weighted by a cubic convolution kernel read from a
table of 1/1024 steps - Keys' a = -0.5 with half-pixel centres, where taps outside the image get no weight and the
rest are renormalized; a = -0.75 otherwise, taps clamped to the edge."""
from __future__ import annotations

import numpy as np

TABLE_SIZE = 1024
F32 = np.float32


def _table(a: float) -> np.ndarray:
    """[TABLE_SIZE + 1, 2]: the kernel at distance i / TABLE_SIZE (the near taps) and 1 + i / TABLE_SIZE (the far
    ones), computed in double from a float distance and stored in float."""
    x = (np.arange(TABLE_SIZE + 1) / TABLE_SIZE).astype(F32).astype(np.float64)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    x = x + 1.0
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.stack([near, far], axis=1).astype(F32)


TABLES = {True: _table(-0.5), False: _table(-0.75)}


def cubic_taps(size_in: int, size_out: int, align_corners: bool, half_pixel: bool) -> tuple[np.ndarray, np.ndarray]:
    """(indices [size_out, 4] int64, weights [size_out, 4] float32) of each output position along one axis."""
    if align_corners and size_out > 1:
        scale = F32(size_in - 1) / F32(size_out - 1)
    else:
        scale = F32(size_in) / F32(size_out)
    at = np.arange(size_out, dtype=F32)
    source = (at + F32(0.5)) * scale - F32(0.5) if half_pixel else at * scale
    base = np.floor(source)
    offset = np.rint((source - base) * F32(TABLE_SIZE)).astype(np.int64)  # (lrintf: halves to even)
    table = TABLES[bool(half_pixel)]
    weights = np.stack([table[offset, 1], table[offset, 0], table[TABLE_SIZE - offset, 0],
                        table[TABLE_SIZE - offset, 1]], axis=1)
    wanted = base.astype(np.int64)[:, None] + np.arange(-1, 3)
    indices = np.clip(wanted, 0, size_in - 1)
    if half_pixel:  # Keys: no weight outside the image, the rest renormalized
        weights = np.where(indices == wanted, weights, F32(0))
        total = weights[:, 0] + weights[:, 1] + weights[:, 2] + weights[:, 3]
        big = np.abs(total) >= F32(1000) * np.finfo(F32).tiny
        weights = np.where(big[:, None], weights * (F32(1) / np.where(big, total, F32(1)))[:, None], weights)
    return indices, weights.astype(F32)


def cubic_matrix(size_in: int, size_out: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """[size_out, size_in] float32: the resize along one axis as a matrix product (the taps summed in place)."""
    indices, weights = cubic_taps(size_in, size_out, align_corners, half_pixel)
    matrix = np.zeros((size_out, size_in), F32)
    np.add.at(matrix, (np.repeat(np.arange(size_out), 4), indices.ravel()), weights.ravel())
    return matrix
