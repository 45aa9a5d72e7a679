"""CPU kernel of the HSwishBlock layer of the scope example (x * clamp(x + shift, 0, max) / max)."""
import numpy as np


class HSwishBlockKernel:
    type = "HSwishBlock"

    def __init__(self, layer):
        self.shift = float(layer.data["shift"])
        self.max = float(layer.data["max"])

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        return [tuple(input_shapes[0])]

    def forward(self, inputs):
        x = inputs[0]
        return [(x * np.clip(x + self.shift, 0.0, self.max) / self.max).astype(np.float32)]
