"""Float16 conversion of blobs with the reference's clipping warnings (FAQ #75/#76).

Used by the converter's precision pass (core/middle/precision.py) and by the writer
when it is asked to force a precision on a hand-made network.
"""
from __future__ import annotations

import numpy as np


def to_float16(values: np.ndarray, node_name: str, warnings: list[str]) -> np.ndarray:
    """values as float16; counts of values that overflow to inf or underflow to zero
    are appended to `warnings` in the reference's wording, so users can look them up."""
    values = np.asarray(values)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        converted = values.astype(np.float16)
        clipped_inf = int(np.count_nonzero(np.isfinite(values) & np.isinf(converted)))
        clipped_zero = int(np.count_nonzero((values != 0) & (converted == 0)))
    if clipped_inf:
        warnings.append(f"{clipped_inf} elements of {values.size} were clipped to infinity while converting "
                        f"a blob for node [{node_name}] to float16. For more information please refer to "
                        "Model Optimizer FAQ, question #75.")
    if clipped_zero:
        warnings.append(f"{clipped_zero} elements of {values.size} were clipped to zero while converting "
                        f"a blob for node [{node_name}] to float16. For more information please refer to "
                        "Model Optimizer FAQ, question #76.")
    return converted
