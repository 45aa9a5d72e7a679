"""ArgMax, Caffe semantics.

Without `axis`: per item of the batch over all other values flattened; output
[N, 1, top_k] indices, or [N, 2, top_k] with out_max_val (indices, then values),
padded with trailing 1s to the input rank (at least 3-D).
With `axis`: the top_k indices (or, with out_max_val, the values) along it.
Ties: the larger index first (Caffe sorts (value, index) pairs descending), or with
ties "first" the smaller (TensorFlow's ArgMax).
"""
from __future__ import annotations

import numpy as np

from .base import Kernel, register


@register("ArgMax")
class ArgMax(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.top_k = self.attrs["top_k"]
        self.out_max_val = self.attrs["out_max_val"]
        self.axis = self.attrs["axis"]
        self.first = self.attrs["ties"] == "first"
        if self.top_k < 1:
            raise self.error(f"top_k {self.top_k} must be at least 1")

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = list(input_shapes[0])
        if self.axis is not None:
            a = self.axis_in(self.axis, len(shape))
            if self.top_k > shape[a]:
                raise self.error(f"top_k {self.top_k} exceeds axis {a} of size {shape[a]}")
            shape[a] = self.top_k
            return [tuple(shape)]
        if self.top_k > int(np.prod(shape[1:])):
            raise self.error(f"top_k {self.top_k} exceeds the {int(np.prod(shape[1:]))} values per item")
        out = [1] * max(3, len(shape))
        out[0] = shape[0]
        out[1] = 2 if self.out_max_val else 1
        out[2] = self.top_k
        return [tuple(out)]

    def _top(self, values, k, axis):
        if self.first:  # a stable sort of the negated values: descending, ties by the smaller index first
            order = np.argsort(np.negative(values), axis=axis, kind="stable")
        else:  # a stable ascending sort reversed: descending, ties by the larger index first
            order = np.flip(np.argsort(values, axis=axis, kind="stable"), axis=axis)
        return np.take(order, np.arange(k), axis=axis)

    def forward(self, inputs):
        x = inputs[0]
        out_shape = self.getMemoryShapes([x.shape])[0]
        if self.axis is not None:
            a = self.axis_in(self.axis, x.ndim)
            idx = self._top(x, self.top_k, a)
            if self.out_max_val:
                return [np.take_along_axis(x, idx, axis=a).astype(np.float32)]
            return [idx.astype(np.float32)]
        flat = x.reshape(x.shape[0], -1)
        idx = self._top(flat, self.top_k, 1)
        if self.out_max_val:
            vals = np.take_along_axis(flat, idx, axis=1)
            out = np.stack([idx.astype(np.float32), vals.astype(np.float32)], axis=1)
        else:
            out = idx.astype(np.float32)[:, None, :]
        return [out.reshape(out_shape)]
