"""FullyConnected (Caffe InnerProduct) on the GPU (fully_connected.cl). Weights
are uploaded once: transposed to (in, out) for GPUs (neighbouring work items
read neighbouring weights), in the IR's (out, in) rows for CPU-like OpenCL
devices (a work item runs 8-wide dot products along a row)."""
from __future__ import annotations

import numpy as np

from .base import GpuKernel, i32, register, round_up

RB = 4  # rows per work item (fully_connected.cl)


@register("FullyConnected", "InnerProduct")
class FullyConnected(GpuKernel):
    program = "fully_connected.cl"
    fuses_activation = True

    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        ref = self.ref
        self.simd = ctx.style == "simd"
        self.weights = ctx.upload(ref.weights_t.T if self.simd else ref.weights_t)
        self.bias = ctx.upload(ref.bias) if ref.bias is not None else ctx.dummy
        self.has_bias = int(ref.bias is not None)

    def launches(self, ins, outs):
        ref = self.ref
        rows = int(np.prod(self.out_shapes[0][:-1]))
        args = [ins[0], self.weights, self.bias, outs[0]] + i32(rows, ref.in_size, ref.out_size, self.has_bias) \
            + self.act_args()
        if self.simd:
            return [self.launch("fully_connected_rows", args, (ref.out_size, -(-rows // RB)))]
        return [self.launch("fully_connected", args, (round_up(ref.out_size, 8), -(-rows // RB)))]
