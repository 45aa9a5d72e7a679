"""Memory: a state kept between infer calls (the catalog's delay layer).

In the IR a Memory is a pair with the same `id`: index="1" has no input and
outputs the state saved by the previous infer call (zeros at first, and after
ExecutionPlan.reset_state() or a reshape); index="0" has one input and no output
and saves that input as the new state. The plan runs every reader before any
writer in a call and hands both the same `states` dict.
"""
from __future__ import annotations

import numpy as np

from .base import Kernel, register


@register("Memory")
class Memory(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.state_id = self.attrs["id"]
        self.index = self.attrs["index"]
        self.size = self.attrs["size"]
        if self.index not in (0, 1):
            raise self.error(f"index {self.index} must be 0 (the writing layer) or 1 (the reading layer)")
        if self.size != 2:
            raise self.error(f"size {self.size} is not supported; Memory layers come in pairs (size 2)")
        if self.index == 1:
            if layer.inputs or len(layer.outputs) != 1:
                raise self.error("the reading Memory layer (index 1) must have no input and one output")
            self.ir_shape = tuple(layer.outputs[0].dims)
        elif len(layer.inputs) != 1 or layer.outputs:
            raise self.error("the writing Memory layer (index 0) must have one input and no output")
        self.states: dict = {}
        self.batch = None

    @property
    def is_reader(self):
        return self.index == 1

    def set_batch(self, batch: int):
        self.batch = batch

    def _state_shape(self):
        shape = list(self.ir_shape)
        if self.batch is not None and shape:
            shape[0] = self.batch
        return tuple(shape)

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        if self.is_reader:
            return [self._state_shape()]
        self.expect_inputs(input_shapes, 1)
        return []

    def forward(self, inputs):
        if self.is_reader:
            shape = self._state_shape()
            state = self.states.get(self.state_id)
            if state is None or state.shape != shape:
                return [np.zeros(shape, np.float32)]
            return [state.copy()]
        self.states[self.state_id] = np.array(inputs[0], dtype=np.float32, copy=True)
        return []
