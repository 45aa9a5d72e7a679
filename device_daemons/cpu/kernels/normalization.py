"""Normalizations: SoftMax, Norm (Caffe LRN), Normalize (SSD L2), MVN, GRN, BatchNormalization.

Norm across:  y = x / (k + alpha/n * sum_{window of n channels} x^2) ^ beta
Norm same:    Caffe WITHIN_CHANNEL: y = x * (1 + alpha * avg_{n x n window, zero
              padded, divided by n*n} x^2) ^ -beta  (k does not take part)
Normalize:    y = x / sqrt(sum x^2 + eps) * scale, the sum over C (per pixel) or over
              C*H*W (across_spatial); scale per channel or shared.
MVN:          y = (x - mean) [/ (std + eps)] per (n, c) or per n (across_channels);
              eps is added to the standard deviation (Caffe).
GRN:          y = x / sqrt(sum_c x^2 + bias).
BatchNormalization (IRs from other tools; this converter lowers Caffe BatchNorm to
              ScaleShift): y = (x - mean) / sqrt(variance + epsilon) [* gamma + beta] per
              channel. Blobs: `mean`/`variance`, or the legacy names `biases` (mean) and
              `weights` (variance); optional `gamma`, `beta`.
"""
from __future__ import annotations

import numpy as np

from .base import Kernel, broadcast_shape, channel_vector, register


@register("SoftMax", "Softmax")
class SoftMax(Kernel):
    supports_inplace = True

    def __init__(self, layer):
        super().__init__(layer)
        self.axis = self.attrs["axis"]

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        self.axis_in(self.axis, len(input_shapes[0]))
        return [tuple(input_shapes[0])]

    def forward(self, inputs):
        x = inputs[0]
        axis = self.axis_in(self.axis, x.ndim)
        out = x if self.inplace else np.empty_like(x)
        np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
        np.exp(out, out=out)
        out /= out.sum(axis=axis, keepdims=True)
        return [out]


@register("LogSoftmax")
class LogSoftmax(SoftMax):
    def forward(self, inputs):
        x = inputs[0]
        axis = self.axis_in(self.axis, x.ndim)
        shifted = x - x.max(axis=axis, keepdims=True)
        out = x if self.inplace else np.empty_like(x)
        np.subtract(shifted, np.log(np.exp(shifted).sum(axis=axis, keepdims=True)), out=out)
        return [out]


def _pow_neg(base, beta, out):
    """base ** -beta into out (base > 0), with fast paths for the usual betas."""
    if beta == 0.75:
        np.sqrt(base, out=out)
        root4 = np.sqrt(out)
        out *= root4
        np.reciprocal(out, out=out)
    elif beta == 0.5:
        np.sqrt(base, out=out)
        np.reciprocal(out, out=out)
    elif beta == 1.0:
        np.reciprocal(base, out=out)
    else:
        np.power(base, np.float32(-beta), out=out)
    return out


@register("Norm", "LRN")
class Norm(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.alpha, self.beta, self.k = a["alpha"], a["beta"], a["k"]
        self.size, self.region = a["local-size"], a["region"]
        if self.size <= 0 or self.size % 2 == 0:
            raise self.error(f"local-size {self.size} must be a positive odd number")

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1, rank=4)
        return [tuple(input_shapes[0])]

    def forward(self, inputs):
        x = inputs[0]
        n, c, h, w = x.shape
        size, pre = self.size, (self.size - 1) // 2
        if self.region == "across":
            sq = np.square(x)
            sq *= np.float32(self.alpha / size)
            scale = np.add(sq, np.float32(self.k))
            for d in range(1, pre + 1):
                if d >= c:
                    break
                scale[:, d:] += sq[:, :-d]
                scale[:, :-d] += sq[:, d:]
        else:
            padded = np.zeros((n, c, h + size - 1, w + size - 1), np.float32)
            np.square(x, out=padded[:, :, pre:pre + h, pre:pre + w])
            rows = padded[:, :, 0:h].copy()
            for i in range(1, size):
                rows += padded[:, :, i:i + h]
            sq = rows[:, :, :, 0:w].copy()
            for i in range(1, size):
                sq += rows[:, :, :, i:i + w]
            sq *= np.float32(self.alpha / (size * size))
            scale = np.add(sq, np.float32(1.0))
        # x * scale^-beta
        if self.beta == 0.75:
            np.sqrt(scale, out=sq)
            np.sqrt(sq, out=scale)
            sq *= scale
            return [np.divide(x, sq, out=scale)]
        _pow_neg(scale, self.beta, scale)
        scale *= x
        return [scale]


@register("Normalize")
class Normalize(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.across_spatial = self.attrs["across_spatial"]
        self.channel_shared = self.attrs["channel_shared"]
        self.eps = self.attrs["eps"]
        self.scale = self.blob("weights")

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = input_shapes[0]
        if len(shape) < 2:
            raise self.error(f"needs an input with a channel axis, got shape {list(shape)}")
        if not self.channel_shared:
            channel_vector(self, self.scale, shape[1], "the scale blob 'weights'")
        return [tuple(shape)]

    def forward(self, inputs):
        x = inputs[0]
        n = x.shape[0]
        sq = np.square(x)
        if self.across_spatial:
            norm = sq.reshape(n, -1).sum(axis=1, dtype=np.float64) + self.eps
            norm = np.sqrt(norm).astype(np.float32).reshape((n,) + (1,) * (x.ndim - 1))
        else:
            norm = sq.sum(axis=1, keepdims=True)
            norm += np.float32(self.eps)
            np.sqrt(norm, out=norm)
        out = np.divide(x, norm, out=sq)
        if self.channel_shared or self.scale.size == 1:
            out *= self.scale[0]
        else:
            out *= broadcast_shape(self.scale, x.ndim)
        return [out]


@register("MVN")
class MVN(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.across_channels = self.attrs["across_channels"]
        self.normalize_variance = self.attrs["normalize_variance"]
        self.eps = self.attrs["eps"]

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        if len(input_shapes[0]) < 2:
            raise self.error(f"needs at least a 2-D input, got {list(input_shapes[0])}")
        return [tuple(input_shapes[0])]

    def forward(self, inputs):
        x = inputs[0]
        shape = x.shape
        rows = shape[0] if self.across_channels else shape[0] * shape[1]
        flat = x.reshape(rows, -1)
        mean = flat.mean(axis=1, keepdims=True, dtype=np.float64).astype(np.float32)
        out = np.subtract(flat, mean)
        if self.normalize_variance:
            var = np.square(out).mean(axis=1, keepdims=True, dtype=np.float64)
            std = (np.sqrt(var) + self.eps).astype(np.float32)
            out /= std
        return [out.reshape(shape)]


@register("LayerNorm")
class LayerNorm(Kernel):
    """Keras' LayerNormalization: over one axis, eps inside the square root, then weights and biases."""

    def __init__(self, layer):
        super().__init__(layer)
        self.axis = self.attrs["axis"]
        self.eps = self.attrs["eps"]
        self.weights = self.blob("weights", required=False)
        self.biases = self.blob("biases", required=False)

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = tuple(input_shapes[0])
        size = shape[self.axis_in(self.axis, len(shape))]
        for name, blob in (("weights", self.weights), ("biases", self.biases)):
            if blob is not None and blob.size != size:
                raise self.error(f"has {blob.size} {name} for an axis of {size}")
        return [shape]

    def forward(self, inputs):
        x = inputs[0]
        axis = self.axis_in(self.axis, x.ndim)
        mean = x.mean(axis=axis, keepdims=True, dtype=np.float64)
        centered = x - mean.astype(np.float32)
        var = np.square(centered).mean(axis=axis, keepdims=True, dtype=np.float64)
        out = centered * (1.0 / np.sqrt(var + self.eps)).astype(np.float32)
        along = [1] * x.ndim
        along[axis] = -1
        if self.weights is not None:
            out *= self.weights.reshape(along)
        if self.biases is not None:
            out += self.biases.reshape(along)
        return [out]


@register("GRN")
class GRN(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.bias = self.attrs["bias"]

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        if len(input_shapes[0]) < 2:
            raise self.error(f"needs an input with a channel axis, got {list(input_shapes[0])}")
        return [tuple(input_shapes[0])]

    def forward(self, inputs):
        x = inputs[0]
        norm = np.square(x).sum(axis=1, keepdims=True)
        norm += np.float32(self.bias)
        np.sqrt(norm, out=norm)
        return [x / norm]


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
