"""MatMul's output shape (numpy's matmul, OpenVINO's MatMul): shared by the converter
and the daemons."""
from __future__ import annotations

import numpy as np


def matmul_shape(a, b, transpose_a: bool = False, transpose_b: bool = False) -> tuple[int, ...]:
    """The output shape of the product of shapes a and b, each at least 2-D and maybe transposed on its last two
    axes; leading axes broadcast. ValueError (its message says why) when they do not multiply."""
    a, b = [int(d) for d in a], [int(d) for d in b]
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"MatMul takes operands of at least 2 axes, got {a} and {b}")
    if transpose_a:
        a[-2], a[-1] = a[-1], a[-2]
    if transpose_b:
        b[-2], b[-1] = b[-1], b[-2]
    if a[-1] != b[-2]:
        raise ValueError(f"operands {a} and {b} (after the transposes) do not multiply: {a[-1]} != {b[-2]}")
    try:
        batch = np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
    except ValueError:
        raise ValueError(f"the leading axes of {a} and {b} do not broadcast") from None
    return tuple(int(d) for d in batch) + (a[-2], b[-1])
