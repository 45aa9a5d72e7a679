"""Element-wise activations: ReLU (leaky: PRelu), Activation (Sigmoid, Tanh, Elu,
Abs, Clamp for relu6, ReLU, Erf, Gelu-7 with its approximation mode, Exp, Log, Floor,
Ceiling, Round-5 halves to even, trunc as a Convert to i64 and back, SoftPlus-4, Sign, Sin ... Cosh, Asinh-4 ...
Atanh-4, log1p and expm1 as Log(x + 1) and Exp(x) - 1, SoftSign-9), Clamp, PReLU
(PRelu), Power ((shift + scale*x)^power as Multiply, Add, Power), FakeQuantize (FakeQuantize-1, scalar ranges)."""
from __future__ import annotations

import numpy as np

from .base import Mapping, maps, per_channel

def _relu(m: Mapping, slope: float):
    x = m.inputs[0]
    if slope == 0.0:
        return m.op("ReLU", [x], x.shape)
    return m.op("PRelu", [x, m.const(np.float32([slope]), "slope")], x.shape)


@maps("ReLU")
def relu(m: Mapping):
    return [_relu(m, m.attrs["negative_slope"])]


@maps("Activation")
def activation(m: Mapping):
    a = m.attrs
    kind = a["type"]
    x = m.inputs[0]
    if kind == "relu":
        return [_relu(m, a["negative_slope"])]
    if kind == "elu":
        return [m.op("Elu", [x], x.shape, attrs={"alpha": a["alpha"]})]
    if kind == "relu6":
        return [m.op("Clamp", [x], x.shape, attrs={"min": 0.0, "max": 6.0})]
    if kind == "gelu":
        mode = a["approximation_mode"].upper()
        return [m.op("Gelu", [x], x.shape, version="opset7", attrs={"approximation_mode": mode})]
    if kind == "softplus":
        return [m.op("SoftPlus", [x], x.shape, version="opset4")]
    if kind == "softsign":
        return [m.op("SoftSign", [x], x.shape, version="opset9")]
    if kind == "round":
        return [m.op("Round", [x], x.shape, version="opset5", attrs={"mode": "half_to_even"})]
    if kind == "trunc":  # (a Convert from a float to an integer type drops the fraction)
        whole = m.op("Convert", [x], x.shape, "whole", attrs={"destination_type": "i64"}, element_type="i64")
        return [m.op("Convert", [whole], x.shape, attrs={"destination_type": "f32"})]
    if kind in ("log1p", "expm1"):  # (no such operation: log(1 + x) and exp(x) - 1, as OpenVINO's TensorFlow front
        # end has them; exact near 0 no more)
        one = m.const(np.float32(1.0), "one")
        if kind == "log1p":
            return [m.op("Log", [m.op("Add", [x, one], x.shape, "plus_one", attrs={"auto_broadcast": "numpy"})],
                         x.shape)]
        return [m.op("Subtract", [m.op("Exp", [x], x.shape, "exp"), one], x.shape, attrs={"auto_broadcast": "numpy"})]
    if kind in ("asinh", "acosh", "atanh"):
        return [m.op(kind.capitalize(), [x], x.shape, version="opset4")]
    type_ = {"sigmoid": "Sigmoid", "tanh": "Tanh", "abs": "Abs", "erf": "Erf", "exp": "Exp", "log": "Log",
             "floor": "Floor", "ceil": "Ceiling"}.get(kind) or kind.capitalize()  # (Sign, Sin ... Cosh)
    return [m.op(type_, [x], x.shape)]


@maps("Clamp")
def clamp(m: Mapping):
    lo, hi = m.attrs["min"], m.attrs["max"]
    if lo > hi:
        raise m.attrs.error(f"min {lo} is greater than max {hi}")
    x = m.inputs[0]
    return [m.op("Clamp", [x], x.shape, attrs={"min": lo, "max": hi})]


@maps("PReLU")
def prelu(m: Mapping):
    x = m.inputs[0]
    slopes = m.attrs.blob("weights")
    if m.attrs["channel_shared"]:
        slopes = slopes[:1]
    channels = x.shape[1] if len(x.shape) > 1 else x.shape[0]
    slope = per_channel(m, slopes, len(x.shape), channels, "the slope blob 'weights'")
    return [m.op("PRelu", [x, m.const(slope, "slope")], x.shape)]


@maps("Power")
def power(m: Mapping):
    a = m.attrs
    p, scale, shift = a["power"], a["scale"], a["shift"]
    x = m.inputs[0]
    steps = [("Multiply", "scale", scale)] if scale != 1.0 else []
    if shift != 0.0:
        steps.append(("Add", "shift", shift))
    if p != 1.0:
        steps.append(("Power", "power", p))
    if not steps:
        return [m.identity(x)]
    y = x
    for i, (type_, what, value) in enumerate(steps):
        last = i == len(steps) - 1
        y = m.op(type_, [y, m.const(np.float32(value), what)], x.shape, None if last else type_.lower(),
                 attrs={"auto_broadcast": "numpy"})
    return [y]


@maps("FakeQuantize")
def fake_quantize(m: Mapping):
    a = m.attrs
    x = m.inputs[0]
    ranges = [m.const(np.float32(a[k]), k) for k in ("input_low", "input_high", "output_low", "output_high")]
    return [m.op("FakeQuantize", [x] + ranges, x.shape, attrs={"levels": a["levels"], "auto_broadcast": "numpy"})]
