"""StridedSlice (own type): output element i of each axis is input element
begin + i * stride (core/ops/slicing.py). Returns a view of the input."""
from __future__ import annotations

from .base import Kernel, register


@register("StridedSlice")
class StridedSlice(Kernel):
    output_is_view = True

    def __init__(self, layer):
        super().__init__(layer)
        self.begin, self.stride, self.size = self.attrs["begin"], self.attrs["stride"], self.attrs["size"]
        if not len(self.begin) == len(self.stride) == len(self.size):
            raise self.error("begin, stride and size must have one value per axis")
        if 0 in self.stride:
            raise self.error(f"stride {self.stride} must not be 0")
        # an axis taken whole in the IR stays whole for another batch
        ir_in = tuple(layer.inputs[0].dims) if layer.inputs else ()
        self.whole = [len(ir_in) == len(self.begin) and b == 0 and s == 1 and n == ir_in[a]
                      for a, (b, s, n) in enumerate(zip(self.begin, self.stride, self.size))]

    def _slices(self, shape):
        if len(shape) != len(self.begin):
            raise self.error(f"has {len(self.begin)} axes of slicing for a {len(shape)}-D input {list(shape)}")
        slices = []
        for axis, (b, s, n) in enumerate(zip(self.begin, self.stride, self.size)):
            if self.whole[axis]:
                slices.append(slice(None))
                continue
            last = b + (n - 1) * s
            if not (0 <= b < shape[axis] and 0 <= last < shape[axis]):
                raise self.error(f"begin {b}, stride {s}, size {n} leave axis {axis} of the input {list(shape)}")
            stop = last + (1 if s > 0 else -1)
            slices.append(slice(b, stop if stop >= 0 else None, s))
        return tuple(slices)

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = input_shapes[0]
        self._slices(shape)
        return [tuple(shape[a] if self.whole[a] else n for a, n in enumerate(self.size))]

    def forward(self, inputs):
        x = inputs[0]
        return [x[self._slices(x.shape)]]
