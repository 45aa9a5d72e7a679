"""ReduceMean, ReduceSum, ReduceMax, ReduceMin (own types, core/ops/reduce.py):
`axes` reduced, `keep_dims` keeps them with size 1; CumSum, the running sum along
`axis`. Sums and means accumulate in float64 for float32 inputs of any length."""
from __future__ import annotations

import numpy as np

from ir.scan import cumsum

from .base import Kernel, register

_FUNCS = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min}


@register(*_FUNCS)
class Reduce(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.axes, self.keep_dims = self.attrs["axes"], self.attrs["keep_dims"]
        self.func = _FUNCS[layer.type]
        if not self.axes:
            raise self.error("has no axes to reduce")

    def _axes(self, rank):
        if any(not -rank <= a < rank for a in self.axes):
            raise self.error(f"axes {self.axes} do not fit a {rank}-D input")
        return tuple(sorted({a % rank for a in self.axes}))

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = list(input_shapes[0])
        axes = self._axes(len(shape))
        if self.keep_dims:
            return [tuple(1 if i in axes else d for i, d in enumerate(shape))]
        return [tuple(d for i, d in enumerate(shape) if i not in axes)]

    def forward(self, inputs):
        x = inputs[0]
        axes = self._axes(x.ndim)
        if self.func in (np.mean, np.sum):
            out = self.func(x, axis=axes, keepdims=self.keep_dims, dtype=np.float64).astype(np.float32)
        else:
            out = self.func(x, axis=axes, keepdims=self.keep_dims)
        out = np.asarray(out, dtype=np.float32)  # (ascontiguousarray makes a scalar [1]: a full reduction is 0-D)
        return [out if out.flags.c_contiguous else np.ascontiguousarray(out)]


@register("CumSum")
class CumSum(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.axis, self.exclusive, self.reverse = self.attrs["axis"], self.attrs["exclusive"], self.attrs["reverse"]

    def _axis(self, rank):
        if not -rank <= self.axis < rank:
            raise self.error(f"axis {self.axis} does not fit a {rank}-D input")
        return self.axis % rank

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        self._axis(len(input_shapes[0]))
        return [tuple(input_shapes[0])]

    def forward(self, inputs):
        x = inputs[0]
        out = cumsum(x, self._axis(x.ndim), self.exclusive, self.reverse, dtype=np.float64)
        return [np.ascontiguousarray(out, dtype=np.float32)]
