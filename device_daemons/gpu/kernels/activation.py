"""Element-wise activations on the GPU (activation.cl): ReLU (leaky), Clamp,
Activation (sigmoid, tanh, elu, abs, relu6, relu, erf, gelu, exp, log, floor, ceil,
round, trunc, softplus, sign, sin ... atanh, log1p, expm1, softsign), PReLU, Power, FakeQuantize.

`activation_code(kernel)` says which of them a convolution, fully connected,
eltwise or scale-shift layer can apply in its epilogue instead (the plan fuses
them when the activation is the only reader of that layer's output).
"""
from __future__ import annotations

import numpy as np

from .base import (ACT_ABS, ACT_CLAMP, ACT_ELU, ACT_ERF, ACT_FUNCTIONS, ACT_GELU_ERF, ACT_GELU_TANH, ACT_RELU,
                   ACT_SIGMOID, ACT_TANH, GpuKernel,
                   channel_layout, f32, i32, register, round_up)

_ACTIVATION_TYPES = {"sigmoid": ACT_SIGMOID, "tanh": ACT_TANH, "abs": ACT_ABS, "erf": ACT_ERF, **ACT_FUNCTIONS}


def activation_code(kernel) -> tuple | None:
    """(ACT_* code, a, b) of a ReLU / Clamp / Activation GPU kernel, else None."""
    ref = kernel.ref
    t = kernel.layer.type
    if t == "ReLU":
        return ACT_RELU, ref.slope, 0.0
    if t == "Clamp":
        return ACT_CLAMP, ref.lo, ref.hi
    if t == "Activation":
        if ref.kind == "relu":
            return ACT_RELU, ref.slope, 0.0
        if ref.kind == "relu6":
            return ACT_CLAMP, 0.0, 6.0
        if ref.kind == "elu":
            return ACT_ELU, ref.alpha, 0.0
        if ref.kind == "gelu":
            return (ACT_GELU_TANH if ref.approximation == "tanh" else ACT_GELU_ERF), 0.0, 0.0
        return _ACTIVATION_TYPES[ref.kind], 0.0, 0.0
    return None


class _Elementwise(GpuKernel):
    program = "activation.cl"
    inplace = True

    def count(self):
        return int(np.prod(self.in_shapes[0]))


@register("ReLU", "Clamp", "Activation")
class Activation(_Elementwise):
    def launches(self, ins, outs):
        code, a, b = activation_code(self)
        n = self.count()
        return [self.launch("activation", [ins[0], outs[0]] + i32(n, code) + f32(a, b), (round_up(n, 64),))]


@register("PReLU")
class PReLU(_Elementwise):
    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        self.slopes = ctx.upload(self.ref.slopes)
        self.shared = int(self.ref.slopes.size == 1)

    def launches(self, ins, outs):
        outer, c, inner = channel_layout(self.in_shapes[0])
        args = [ins[0], self.slopes, outs[0]] + i32(c, inner, self.shared)
        return [self.launch("prelu", args, (round_up(inner, 8), c, outer))]


@register("Power")
class Power(_Elementwise):
    def launches(self, ins, outs):
        ref = self.ref
        n = self.count()
        args = [ins[0], outs[0]] + i32(n) + f32(ref.scale, ref.shift, ref.power)
        return [self.launch("power", args, (round_up(n, 64),))]


@register("FakeQuantize")
class FakeQuantize(_Elementwise):
    def launches(self, ins, outs):
        ref = self.ref
        n = self.count()
        args = [ins[0], outs[0]] + i32(n) + f32(ref.low, ref.high, ref.inv_step, ref.out_step, ref.out_low)
        return [self.launch("fake_quantize", args, (round_up(n, 64),))]
