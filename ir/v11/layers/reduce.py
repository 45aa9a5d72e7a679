"""ReduceMean, ReduceSum, ReduceMax, ReduceMin (own types) -> the opset ops of the
same names over `axes`; CumSum -> CumSum-3."""
from __future__ import annotations

import numpy as np

from .base import Mapping, maps


@maps("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")
def reduce(m: Mapping):
    x = m.inputs[0]
    axes = [a + len(x.shape) if a < 0 else a for a in m.attrs["axes"]]
    return [m.op(m.layer.type, [x, m.ints(axes, "axes")], m.out_dims(), attrs={"keep_dims": m.attrs["keep_dims"]})]


@maps("CumSum")
def cumsum(m: Mapping):
    x = m.inputs[0]
    axis = m.attrs["axis"]
    axis = axis + len(x.shape) if axis < 0 else axis
    axis = m.model.const(np.int64(axis), name=m.name("axis"), element_type="i64")  # (a scalar, as CumSum takes)
    return [m.op("CumSum", [x, axis], x.shape, version="opset3",
                 attrs={"exclusive": m.attrs["exclusive"], "reverse": m.attrs["reverse"]})]
