"""FullyConnected (Caffe InnerProduct): y = x.reshape(rows, I) @ W.T + b, weights OI.

`axis` (default 1) is where the flattening starts: the output is
input_shape[:axis] + [out-size].

MatMul: numpy's matmul of two inputs (attention's products), each maybe transposed
on its last two axes; leading axes broadcast.
"""
from __future__ import annotations

import numpy as np

from ir.matmul import matmul_shape

from .base import Kernel, register


@register("FullyConnected", "InnerProduct")
class FullyConnected(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.out_size = self.attrs["out-size"]
        self.axis = self.attrs["axis"]
        w = self.blob("weights")
        if self.out_size <= 0 or w.size % self.out_size:
            raise self.error(f"has {w.size} weights, which is not a multiple of out-size {self.out_size}")
        self.in_size = w.size // self.out_size
        # (O, I) as stored: a view of the IR's weights, no copy; BLAS reads it transposed
        self.weights = w.reshape(self.out_size, self.in_size)
        self.bias = self.blob("biases", required=False, size=self.out_size)

    @property
    def weights_t(self):
        """(I, O) contiguous, a copy made on first use (the GPU daemon uploads it)."""
        return np.ascontiguousarray(self.weights.T)

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = tuple(input_shapes[0])
        axis = self.axis_in(self.axis, len(shape))
        size = int(np.prod(shape[axis:]))
        if size != self.in_size:
            raise self.error(f"input {list(shape)} has {size} values per row from axis {axis}, the weights "
                             f"need {self.in_size}")
        return [shape[:axis] + (self.out_size,)]

    def forward(self, inputs):
        x = inputs[0]
        axis = self.axis_in(self.axis, x.ndim)
        lead = x.shape[:axis]
        x2 = x.reshape(-1, self.in_size)
        out = np.dot(x2, self.weights.T)
        if self.bias is not None:
            out += self.bias
        return [out.reshape(lead + (self.out_size,))]


@register("MatMul")
class MatMul(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.transpose_a = self.attrs["transpose_a"]
        self.transpose_b = self.attrs["transpose_b"]

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 2)
        try:
            return [matmul_shape(*input_shapes, self.transpose_a, self.transpose_b)]
        except ValueError as exc:
            raise self.error(str(exc)) from None

    def forward(self, inputs):
        a, b = inputs
        a = np.swapaxes(a, -1, -2) if self.transpose_a else a
        b = np.swapaxes(b, -1, -2) if self.transpose_b else b
        return [np.matmul(a, b)]
