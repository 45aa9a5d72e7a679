"""What Eltwise's comparisons compute (1.0 where it holds, else 0.0, as the reference's IR had them from v5) and
its two-input arithmetic beyond sum / mul / max (TensorFlow's FloorDiv and FloorMod of floats): the converter's
constant folding and the CPU kernel use these; the schema lists their names."""
from __future__ import annotations

import numpy as np

COMPARE = {"less": np.less, "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
           "equal": np.equal, "not_equal": np.not_equal}


def floor_div(a, b):
    """floor(a / b), as TensorFlow's FloorDiv of floats (numpy's floor_divide differs where a / b rounds to an
    integer)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor(np.divide(a, b, dtype=np.float32))


def floor_mod(a, b):
    """The remainder with the divisor's sign, as TensorFlow's FloorMod of floats: fmod (exact), then b added where
    the signs differ."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.fmod(np.asarray(a, np.float32), np.asarray(b, np.float32))
        return np.where((r != 0) & ((b < 0) != (r < 0)), r + b, r).astype(np.float32)


ARITHMETIC = {"floor_div": floor_div, "floor_mod": floor_mod}
BINARY = {**COMPARE, **ARITHMETIC}  # (the operations of exactly two inputs)
