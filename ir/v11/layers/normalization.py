"""Normalizations: SoftMax (SoftMax), LogSoftmax (LogSoftmax-5), Norm/LRN (LRN), Normalize (NormalizeL2 and a
Multiply by the scale), MVN (MVN, Caffe's eps outside the square root), GRN (GRN),
BatchNormalization (BatchNormInference)."""
from __future__ import annotations

import numpy as np

from .base import Mapping, maps


def _axis(m: Mapping, axis: int, rank: int) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise m.attrs.error(f"axis {axis} is out of range for a {rank}-D input")
    return a


@maps("SoftMax", "Softmax")
def softmax(m: Mapping):
    x = m.inputs[0]
    axis = _axis(m, m.attrs["axis"], len(x.shape))
    return [m.op("SoftMax", [x], x.shape, version="opset8", attrs={"axis": axis})]


@maps("LogSoftmax")
def log_softmax(m: Mapping):
    x = m.inputs[0]
    axis = _axis(m, m.attrs["axis"], len(x.shape))
    return [m.op("LogSoftmax", [x], x.shape, version="opset5", attrs={"axis": axis})]


@maps("Norm", "LRN")
def lrn(m: Mapping):
    """Caffe across: x / (k + alpha/n * sum over n channels)^beta; within: x * (1 +
    alpha/(n*n) * sum over an n x n window)^-beta. OpenVINO divides alpha by
    size^len(axes), so both are LRN with their axes; a k other than 1 is taken out
    as a factor (TensorFlow's LRN bias)."""
    a = m.attrs
    x = m.inputs[0]
    size = a["local-size"]
    if size % 2 == 0:
        raise a.error(f"local-size {size} must be odd")
    axes, bias = ([1], a["k"]) if a["region"] == "across" else ([2, 3], 1.0)
    # OpenVINO 2026's CPU plugin reads LRN's bias as 1 (measured): (k + a s)^-b = k^-b (1 + a/k s)^-b
    attrs = {"alpha": a["alpha"] / bias, "beta": a["beta"], "bias": 1.0, "size": size}
    norm = m.op("LRN", [x, m.ints(axes, "axes")], x.shape, None if bias == 1.0 else "lrn", attrs=attrs)
    if bias == 1.0:
        return [norm]
    return [m.op("Multiply", [norm, m.const(np.float32([bias ** -a["beta"]]), "scale")], x.shape)]


@maps("Normalize")
def normalize(m: Mapping):
    """SSD: x / sqrt(sum x^2 + eps) * scale, the sum over C (or C, H, W)."""
    a = m.attrs
    x = m.inputs[0]
    rank = len(x.shape)
    if rank < 2:
        raise a.error(f"needs an input with a channel axis, got shape {list(x.shape)}")
    axes = list(range(1, rank)) if a["across_spatial"] else [1]
    norm = m.op("NormalizeL2", [x, m.ints(axes, "axes")], x.shape, "l2", attrs={"eps": a["eps"], "eps_mode": "add"})
    scale = a.blob("weights")
    if a["channel_shared"] or scale.size == 1:
        scale = scale[:1].reshape((1,) * rank)
    elif scale.size != x.shape[1]:
        raise a.error(f"the scale blob 'weights' has {scale.size} values for {x.shape[1]} channels")
    else:
        scale = scale.reshape((1, -1) + (1,) * (rank - 2))
    return [m.op("Multiply", [norm, m.const(scale, "scale")], x.shape, attrs={"auto_broadcast": "numpy"})]


@maps("MVN")
def mvn(m: Mapping):
    """(x - mean) [/ (std + eps)] per (n, c), or per n across channels; Caffe adds
    eps to the standard deviation (eps_mode outside_sqrt)."""
    a = m.attrs
    x = m.inputs[0]
    rank = len(x.shape)
    if rank < 2:
        raise a.error(f"needs at least a 2-D input, got {list(x.shape)}")
    axes = list(range(1 if a["across_channels"] else 2, rank))
    attrs = {"eps": a["eps"], "normalize_variance": a["normalize_variance"], "eps_mode": "outside_sqrt"}
    return [m.op("MVN", [x, m.ints(axes, "axes")], x.shape, version="opset6", attrs=attrs)]


@maps("LayerNorm")
def layer_norm(m: Mapping):
    """MVN-6 over the axis (eps inside the square root), then Multiply / Add by the blobs along it."""
    a = m.attrs
    x = m.inputs[0]
    rank = len(x.shape)
    axis = a["axis"] + rank if a["axis"] < 0 else a["axis"]
    if not 0 <= axis < rank:
        raise a.error(f"axis {a['axis']} is out of range for a {rank}-D input")
    along = [1] * rank
    along[axis] = x.shape[axis]
    steps = [(kind, name, a.blob(name, required=False, size=x.shape[axis]))
             for kind, name in (("Multiply", "weights"), ("Add", "biases"))]
    steps = [step for step in steps if step[2] is not None]
    y = m.op("MVN", [x, m.ints([axis], "axes")], x.shape, "mvn" if steps else None, version="opset6",
             attrs={"eps": a["eps"], "normalize_variance": True, "eps_mode": "inside_sqrt"})
    for i, (kind, name, values) in enumerate(steps):  # (the last op has the layer's name)
        y = m.op(kind, [y, m.const(values.reshape(along), name)], x.shape, None if i == len(steps) - 1 else name,
                 attrs={"auto_broadcast": "numpy"})
    return [y]


@maps("GRN")
def grn(m: Mapping):
    x = m.inputs[0]
    return [m.op("GRN", [x], x.shape, attrs={"bias": m.attrs["bias"]})]


@maps("BatchNormalization")
def batch_norm(m: Mapping):
    """(x - mean) / sqrt(variance + epsilon) [* gamma + beta]; blobs mean/variance,
    or the legacy biases (mean) and weights (variance)."""
    a = m.attrs
    x = m.inputs[0]
    mean = a.blob(("mean", "biases"))
    var = a.blob(("variance", "weights"), size=mean.size)
    gamma = a.blob("gamma", required=False, size=mean.size)
    beta = a.blob("beta", required=False, size=mean.size)
    gamma = np.ones(mean.size, np.float32) if gamma is None else gamma
    beta = np.zeros(mean.size, np.float32) if beta is None else beta
    inputs = [x] + [m.const(v, what) for v, what in ((gamma, "gamma"), (beta, "beta"), (mean, "mean"),
                                                      (var, "variance"))]
    return [m.op("BatchNormInference", inputs, x.shape, version="opset5",
                 attrs={"epsilon": a["epsilon"]})]
