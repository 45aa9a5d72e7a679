"""CPU kernel of the Erf layer (OpenCV style), for `-l` / IECore.add_extension."""
import math

import numpy as np


class ErfKernel:
    type = "Erf"

    def __init__(self, layer):
        self.layer = layer

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        return [tuple(input_shapes[0])]

    def forward(self, inputs):
        return [np.vectorize(math.erf, otypes=[np.float32])(inputs[0])]
