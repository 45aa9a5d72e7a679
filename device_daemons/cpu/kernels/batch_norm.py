"""BatchNormalization (IRs from other tools; this converter lowers Caffe BatchNorm
to ScaleShift): y = (x - mean) / sqrt(variance + epsilon) [* gamma + beta] per
channel. Blobs: `mean`/`variance`, or the legacy names `biases` (mean) and
`weights` (variance); optional `gamma`, `beta`."""
from __future__ import annotations

import numpy as np

from .base import Kernel, broadcast_shape, channel_vector, register


@register("BatchNormalization")
class BatchNormalization(Kernel):
    supports_inplace = True

    def __init__(self, layer):
        super().__init__(layer)
        self.epsilon = self.attrs["epsilon"]
        mean = self.blob(("mean", "biases"))
        var = self.blob(("variance", "weights"))
        if mean.size != var.size:
            raise self.error(f"mean has {mean.size} values, variance {var.size}")
        scale = 1.0 / np.sqrt(var.astype(np.float64) + self.epsilon)
        shift = -mean.astype(np.float64) * scale
        gamma = self.blob("gamma", required=False, size=mean.size)
        beta = self.blob("beta", required=False, size=mean.size)
        if gamma is not None:
            scale, shift = scale * gamma, shift * gamma
        if beta is not None:
            shift = shift + beta
        self.scale = scale.astype(np.float32)
        self.shift = shift.astype(np.float32)

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = input_shapes[0]
        channels = shape[1] if len(shape) > 1 else shape[0]
        channel_vector(self, self.scale, channels, "the mean/variance blobs")
        return [tuple(shape)]

    def forward(self, inputs):
        x = inputs[0]
        channels = x.shape[1] if x.ndim > 1 else x.shape[0]
        scale = channel_vector(self, self.scale, channels, "the mean/variance blobs")
        shift = channel_vector(self, self.shift, channels, "the mean/variance blobs")
        if x.ndim > 1:
            scale, shift = broadcast_shape(scale, x.ndim), broadcast_shape(shift, x.ndim)
        out = np.multiply(x, scale, out=x if self.inplace else None)
        out += shift
        return [out]
