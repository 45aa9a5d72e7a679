"""StridedSlice (own type: per axis, output element i is input element begin +
i * stride) -> Slice-8 over the axes not taken whole (so those keep any size,
e.g. another batch)."""
from __future__ import annotations

from .base import Mapping, maps

_BEFORE_FIRST = -(2 ** 63)  # a stop before element 0, for negative strides


@maps("StridedSlice")
def strided_slice(m: Mapping):
    a = m.attrs
    x = m.inputs[0]
    begin, stride, size = a["begin"], a["stride"], a["size"]
    if not len(begin) == len(stride) == len(size) == len(x.shape):
        raise a.error(f"begin, stride and size need one value per axis of the input {list(x.shape)}")
    if 0 in stride:
        raise a.error(f"stride {stride} must not be 0")
    axes, starts, stops, steps = [], [], [], []
    for axis, (b, s, n) in enumerate(zip(begin, stride, size)):
        if (b, s, n) == (0, 1, x.shape[axis]):
            continue
        last = b + (n - 1) * s
        if not (0 <= b < x.shape[axis] and 0 <= last < x.shape[axis]):
            raise a.error(f"begin {b}, stride {s}, size {n} leave axis {axis} of the input {list(x.shape)}")
        stop = last + (1 if s > 0 else -1)
        axes.append(axis)
        starts.append(b)
        stops.append(stop if stop >= 0 else _BEFORE_FIRST)
        steps.append(s)
    if not axes:
        return [m.identity(x)]
    inputs = [x, m.ints(starts, "start"), m.ints(stops, "stop"), m.ints(steps, "step"), m.ints(axes, "axes")]
    return [m.op("Slice", inputs, m.out_dims(), version="opset8")]
