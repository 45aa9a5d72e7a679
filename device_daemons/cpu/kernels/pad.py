"""Pad (own type, core/ops/pad.py): constant (pad_value), reflect (mirror without
the edge value) or symmetric (mirror with it) padding of every axis."""
from __future__ import annotations

import numpy as np

from .base import Kernel, register

_NUMPY_MODE = {"constant": "constant", "reflect": "reflect", "symmetric": "symmetric"}


@register("Pad")
class Pad(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.begin, self.end, self.mode, self.value = a["pads_begin"], a["pads_end"], a["pad_mode"], a["pad_value"]
        if len(self.begin) != len(self.end):
            raise self.error(f"pads_begin {self.begin} and pads_end {self.end} must have one value per axis")

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = input_shapes[0]
        if len(shape) != len(self.begin):
            raise self.error(f"has pads for {len(self.begin)} axes but the input {list(shape)} has {len(shape)}")
        for d, b, e in zip(shape, self.begin, self.end):
            limit = d - 1 if self.mode == "reflect" else d
            if self.mode != "constant" and (b > limit or e > limit):
                raise self.error(f"{self.mode} padding of {b}/{e} values is too large for an axis of {d}")
        return [tuple(d + b + e for d, b, e in zip(shape, self.begin, self.end))]

    def forward(self, inputs):
        widths = list(zip(self.begin, self.end))
        if self.mode == "constant":
            return [np.pad(inputs[0], widths, mode="constant", constant_values=np.float32(self.value))]
        return [np.pad(inputs[0], widths, mode=_NUMPY_MODE[self.mode])]
