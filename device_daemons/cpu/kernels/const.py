"""Const (own type): outputs its blob `custom` reshaped to the output port's dims.

A fresh copy each call: a consumer may compute in place on its input buffer."""
from __future__ import annotations

import numpy as np

from .base import Kernel, register


@register("Const")
class Const(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        if layer.inputs or len(layer.outputs) != 1:
            raise self.error("a Const layer has no input and exactly one output port")
        dims = tuple(layer.outputs[0].dims)
        value = self.blob("custom")
        if value.size != int(np.prod(dims)):
            raise self.error(f"blob 'custom' has {value.size} values but the output dims {list(dims)} need "
                             f"{int(np.prod(dims))}")
        self.value = value.reshape(dims)

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 0)
        return [self.value.shape]

    def forward(self, inputs):
        return [self.value.copy()]
