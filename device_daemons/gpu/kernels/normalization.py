"""SoftMax, LogSoftmax, Norm/LRN, Normalize, LayerNorm and GRN on the GPU (normalization.cl);
BatchNormalization (a per-channel scale and shift: linear.cl's PerChannel)."""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from .base import GpuKernel, channel_layout, f32, i32, register, round_up
from .linear import PerChannel


ROW_MIN = 64  # a SoftMax of rows at least this long reduces each row with a work group


def _axis_layout(shape, axis):
    a = axis + len(shape) if axis < 0 else axis
    outer = int(np.prod(shape[:a])) if a else 1
    inner = int(np.prod(shape[a + 1:])) if a + 1 < len(shape) else 1
    return outer, int(shape[a]), inner


@register("SoftMax", "Softmax")
class SoftMax(GpuKernel):
    program = "normalization.cl"
    inplace = True  # a work item reads its whole axis before it writes it
    log_out = 0  # LogSoftmax: 1

    def launches(self, ins, outs):
        outer, a, inner = _axis_layout(self.in_shapes[0], self.ref.axis)
        if inner == 1 and a >= ROW_MIN:
            # a work item a row would read 1000 scores one after the other: 0.09 ms on an H200
            group = self.ctx.group_size(self.prog(), "softmax_rows", 256)
            return [self.launch("softmax_rows", [ins[0], outs[0]] + i32(a, self.log_out) + [cl.LocalMemory(4 * group)],
                                (group, outer), (group, 1))]
        return [self.launch("softmax", [ins[0], outs[0]] + i32(a, inner, self.log_out), (round_up(inner, 8), outer))]


@register("LogSoftmax")
class LogSoftmax(SoftMax):
    log_out = 1


@register("Norm", "LRN")
class Norm(GpuKernel):
    program = "normalization.cl"

    def launches(self, ins, outs):
        ref = self.ref
        n, c, h, w = self.in_shapes[0]
        if ref.region == "across":
            args = [ins[0], outs[0]] + i32(c, h * w, ref.size) + f32(ref.alpha / ref.size, ref.beta, ref.k)
            return [self.launch("lrn_across", args, (round_up(h * w, 8), c, n))]
        args = [ins[0], outs[0]] + i32(h, w, ref.size) + f32(ref.alpha / (ref.size * ref.size), ref.beta)
        return [self.launch("lrn_within", args, (round_up(w, 8), h, n * c))]


@register("Normalize")
class Normalize(GpuKernel):
    program = "normalization.cl"
    inplace = True  # each value is read (for the norm) before any is written

    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        self.scale = ctx.upload(self.ref.scale)
        self.shared = int(self.ref.channel_shared or self.ref.scale.size == 1)

    def launches(self, ins, outs):
        ref = self.ref
        n, c, inner = channel_layout(self.in_shapes[0])
        args = [ins[0], self.scale, outs[0]] + i32(c, inner) + f32(ref.eps) + i32(self.shared)
        if not ref.across_spatial:
            return [self.launch("normalize_pixel", args, (round_up(inner, 8), n))]
        group = self.ctx.group_size(self.prog(), "normalize_image", 256)
        return [self.launch("normalize_image", args + [cl.LocalMemory(4 * group)], (group, n), (group, 1))]


@register("LayerNorm")
class LayerNorm(GpuKernel):
    program = "normalization.cl"
    inplace = True  # a work item reads its whole axis before it writes it

    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        ref = self.ref
        self.weights = ctx.upload(ref.weights) if ref.weights is not None else ctx.dummy
        self.biases = ctx.upload(ref.biases) if ref.biases is not None else ctx.dummy

    def launches(self, ins, outs):
        ref = self.ref
        outer, a, inner = _axis_layout(self.in_shapes[0], ref.axis_in(ref.axis, len(self.in_shapes[0])))
        args = [ins[0], self.weights, self.biases, outs[0]] + i32(a, inner) + f32(ref.eps) + \
            i32(int(ref.weights is not None), int(ref.biases is not None))
        return [self.launch("layer_norm", args, (round_up(inner, 8), outer))]


@register("GRN")
class GRN(GpuKernel):
    program = "normalization.cl"
    inplace = True  # a work item reads its position's channels before it writes them

    def launches(self, ins, outs):
        shape = self.in_shapes[0]
        inner = int(np.prod(shape[2:]))
        return [self.launch("grn", [ins[0], outs[0]] + i32(shape[1], inner) + f32(self.ref.bias),
                            (round_up(inner, 8), shape[0]))]


@register("BatchNormalization")
class BatchNormalization(PerChannel):
    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        self.scale, self.shift = self.ref.scale, self.ref.shift
