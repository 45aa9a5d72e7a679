"""ScaleShift (a per-channel scale and shift) and Eltwise (sum with coefficients,
mul, max, the comparisons) on the GPU (linear.cl); PerChannel also runs BatchNormalization
(normalization.py)."""
from __future__ import annotations

import numpy as np

from device_daemons.cpu.kernels.base import channel_vector

from .base import NO_ACTIVATION, GpuKernel, channel_layout, f32, i32, register, round_up


class PerChannel(GpuKernel):
    """y = x * scale + shift per channel (linear.cl's scale_shift)."""
    program = "linear.cl"
    inplace = True
    fuses_activation = True
    scale = shift = None  # float32 vectors (one value or one per channel), set by subclasses

    def configure(self, in_shapes, out_shapes):
        super().configure(in_shapes, out_shapes)
        _, c, _ = channel_layout(self.in_shapes[0])
        key = c
        if getattr(self, "_uploaded_for", None) != key:  # a single value broadcast to the channels
            def up(v):
                return self.ctx.upload(channel_vector(self.ref, v, c, "a blob")) if v is not None else self.ctx.dummy
            self._scale, self._shift = up(self.scale), up(self.shift)
            self._uploaded_for = key

    def launches(self, ins, outs):
        outer, c, inner = channel_layout(self.in_shapes[0])
        args = [ins[0], self._scale, self._shift, outs[0]] + i32(c, inner, self.scale is not None,
                                                                  self.shift is not None) + self.act_args()
        return [self.launch("scale_shift", args, (round_up(inner, 8), c, outer))]


@register("ScaleShift")
class ScaleShift(PerChannel):
    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        self.scale, self.shift = self.ref.weights, self.ref.biases


_OPS = {"sum": 0, "mul": 1, "max": 2, "less": 3, "less_equal": 4, "greater": 5, "greater_equal": 6, "equal": 7,
        "not_equal": 8, "floor_div": 9, "floor_mod": 10}


@register("Eltwise")
class Eltwise(GpuKernel):
    program = "linear.cl"
    inplace = True
    fuses_activation = True

    def launches(self, ins, outs):
        ref = self.ref
        n = int(np.prod(self.in_shapes[0]))
        op = _OPS[ref.op]
        coeff = ref.coeff or [1.0] * len(ins)
        size = (round_up(n, 64),)
        last = len(ins) - 1

        def act(k):  # the activation belongs to the last launch of the chain only
            return self.act_args() if k == last else [np.int32(NO_ACTIVATION[0]), np.float32(0), np.float32(0)]
        if len(ins) == 1:
            return [self.launch("eltwise", [ins[0], ins[0], outs[0]] + i32(n, op) + f32(coeff[0], 0.0) + i32(0)
                                + self.act_args(), size)]
        result = [self.launch("eltwise", [ins[0], ins[1], outs[0]] + i32(n, op) + f32(coeff[0], coeff[1]) + i32(1)
                              + act(1), size)]
        for k in range(2, len(ins)):
            result.append(self.launch("eltwise", [outs[0], ins[k], outs[0]] + i32(n, op) + f32(1.0, coeff[k])
                                      + i32(1) + act(k), size))
        return result


@register("Select")
class Select(GpuKernel):
    program = "linear.cl"

    def launches(self, ins, outs):
        n = int(np.prod(self.in_shapes[0]))
        return [self.launch("select_where", [ins[0], ins[1], ins[2], outs[0]] + i32(n), (round_up(n, 64),))]
