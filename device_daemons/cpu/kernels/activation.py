"""Element-wise activations: ReLU (leaky), Activation (sigmoid, tanh, elu, abs,
relu6, relu, erf, gelu, and the plain functions exp, log, floor, ceil, round - halves
to even -, trunc, softplus, sign, sin ... atanh, log1p, expm1 and softsign), Clamp, PReLU, Power
((shift + scale * x) ^ power), FakeQuantize.

All of them may run in place (the plan says when the input buffer is free).
"""
from __future__ import annotations

import numpy as np

from ir.special import erf, gelu

from .base import Kernel, broadcast_shape, channel_vector, register


class _Elementwise(Kernel):
    supports_inplace = True

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        return [tuple(input_shapes[0])]

    def _out(self, x):
        return x if self.inplace else np.empty_like(x)


def relu(x, slope, out):
    if slope == 0:
        return np.maximum(x, 0, out=out)
    # leaky: max(x, 0) + slope * min(x, 0)
    neg = np.minimum(x, 0)
    neg *= slope
    np.maximum(x, 0, out=out)
    out += neg
    return out


def sigmoid(x, out):
    # 1 / (1 + exp(-x)), without overflow warnings for large |x|
    with np.errstate(over="ignore"):
        np.negative(x, out=out)
        np.exp(out, out=out)
        out += 1
        np.reciprocal(out, out=out)
    return out


def softplus(x, out):
    """log(1 + exp(x)) without overflow: logaddexp(0, x)."""
    return np.logaddexp(np.float32(0.0), x, out=out)


def softsign(x, out):
    """x / (1 + |x|) (TensorFlow's Softsign)."""
    denominator = np.abs(x) + 1
    return np.divide(x, denominator, out=out)


# Activation types that are one numpy function (TensorFlow's Exp, Log, Floor, Ceil, Round / Rint, a Cast to an integer,
# Softplus, Sign, Sin ... Atanh, Log1p, Expm1): f(x, out=out)
FUNCTIONS = {"exp": np.exp, "log": np.log, "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc,
             "softplus": softplus, "sign": np.sign, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
             "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
             "acosh": np.arccosh, "atanh": np.arctanh, "log1p": np.log1p, "expm1": np.expm1, "softsign": softsign}


@register("ReLU")
class ReLU(_Elementwise):
    def __init__(self, layer):
        super().__init__(layer)
        self.slope = self.attrs["negative_slope"]

    def forward(self, inputs):
        x = inputs[0]
        return [relu(x, self.slope, self._out(x))]


@register("Activation")
class Activation(_Elementwise):
    def __init__(self, layer):
        super().__init__(layer)
        self.kind = self.attrs["type"]
        self.alpha = self.attrs["alpha"]
        self.slope = self.attrs["negative_slope"]
        self.approximation = self.attrs["approximation_mode"]

    def forward(self, inputs):
        x = inputs[0]
        out = self._out(x)
        kind = self.kind
        if kind in FUNCTIONS:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # (log 0 = -inf, as TensorFlow)
                FUNCTIONS[kind](x, out=out)
        elif kind == "gelu":
            out[...] = gelu(x, self.approximation)
        elif kind == "erf":
            out[...] = erf(x)
        elif kind == "sigmoid":
            sigmoid(x, out)
        elif kind == "tanh":
            np.tanh(x, out=out)
        elif kind == "abs":
            np.abs(x, out=out)
        elif kind == "relu6":
            np.clip(x, 0.0, 6.0, out=out)
        elif kind == "relu":
            relu(x, self.slope, out)
        else:  # elu: x if x > 0 else alpha * (exp(x) - 1)
            neg = np.minimum(x, 0)
            np.expm1(neg, out=neg)
            neg *= self.alpha
            np.maximum(x, 0, out=out)
            out += neg
        return [out]


@register("Clamp")
class Clamp(_Elementwise):
    def __init__(self, layer):
        super().__init__(layer)
        self.lo = self.attrs["min"]
        self.hi = self.attrs["max"]
        if self.lo > self.hi:
            raise self.error(f"min {self.lo} is greater than max {self.hi}")

    def forward(self, inputs):
        x = inputs[0]
        return [np.clip(x, self.lo, self.hi, out=self._out(x))]


@register("PReLU")
class PReLU(_Elementwise):
    def __init__(self, layer):
        super().__init__(layer)
        self.shared = self.attrs["channel_shared"]
        self.slopes = self.blob("weights")
        if self.shared and self.slopes.size != 1:
            self.slopes = self.slopes[:1]

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        shapes = super().getMemoryShapes(input_shapes)
        shape = input_shapes[0]
        channels = shape[1] if len(shape) > 1 else shape[0]
        channel_vector(self, self.slopes, channels, "the slope blob 'weights'")
        return shapes

    def forward(self, inputs):
        x = inputs[0]
        if self.slopes.size == 1:
            slope = self.slopes[0]
        else:
            slope = broadcast_shape(self.slopes, x.ndim) if x.ndim > 1 else self.slopes
        neg = np.minimum(x, 0)
        neg *= slope
        out = np.maximum(x, 0, out=self._out(x))
        out += neg
        return [out]


@register("Power")
class Power(_Elementwise):
    def __init__(self, layer):
        super().__init__(layer)
        self.power = self.attrs["power"]
        self.scale = self.attrs["scale"]
        self.shift = self.attrs["shift"]

    def forward(self, inputs):
        x = inputs[0]
        out = self._out(x)
        if self.scale != 1.0:
            np.multiply(x, np.float32(self.scale), out=out)
        elif out is not x:
            out[...] = x
        if self.shift != 0.0:
            out += np.float32(self.shift)
        p = self.power
        with np.errstate(invalid="ignore", divide="ignore"):
            if p == 1.0:
                pass
            elif p == 2.0:
                np.square(out, out=out)
            elif p == 0.5:
                np.sqrt(out, out=out)
            elif p == -1.0:
                np.reciprocal(out, out=out)
            elif p == 0.0:
                out[...] = 1.0
            else:
                np.power(out, np.float32(p), out=out)
        return [out]


@register("FakeQuantize")
class FakeQuantize(_Elementwise):
    """In float32, in TensorFlow's order of operations: (clamped - low) * (steps / (high - low)) + 0.5, floored,
    times the output step, plus output_low (the floor of v + 0.5 rounds halves up: v >= 0 here)."""

    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.low, self.high = np.float32(a["input_low"]), np.float32(a["input_high"])
        if not self.low < self.high:
            raise self.error(f"input_low {self.low} must be below input_high {self.high}")
        steps = np.float32(a["levels"] - 1)
        self.inv_step = steps / (self.high - self.low)
        self.out_step = (np.float32(a["output_high"]) - np.float32(a["output_low"])) / steps
        self.out_low = np.float32(a["output_low"])

    def forward(self, inputs):
        x = inputs[0]
        out = np.clip(x, self.low, self.high, out=self._out(x))
        out -= self.low
        out *= self.inv_step
        out += np.float32(0.5)
        np.floor(out, out=out)
        out *= self.out_step
        out += self.out_low
        return [out]
