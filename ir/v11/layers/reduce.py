"""ReduceMean, ReduceSum, ReduceMax, ReduceMin (own types) -> the opset ops of the
same names over `axes`."""
from __future__ import annotations

from .base import Mapping, maps


@maps("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")
def reduce(m: Mapping):
    x = m.inputs[0]
    axes = [a + len(x.shape) if a < 0 else a for a in m.attrs["axes"]]
    return [m.op(m.layer.type, [x, m.ints(axes, "axes")], m.out_dims(), attrs={"keep_dims": m.attrs["keep_dims"]})]
