"""Pad (constant, reflect, symmetric along every axis): pad.cl, the CPU kernels'
pad.py family; one work item an output element."""
from __future__ import annotations

import numpy as np

from .base import GpuKernel, f32, i32, register, round_up
from .shape_ops import contiguous_strides

MAX_RANK = 6  # pad.cl's PAD_RANK
MODES = {"constant": 0, "reflect": 1, "symmetric": 2}


@register("Pad")
class Pad(GpuKernel):
    program = "pad.cl"

    @staticmethod
    def _too_deep(rank: int) -> str | None:
        return f"a Pad of a {rank}-D tensor (the GPU plugin pads {MAX_RANK})" if rank > MAX_RANK else None

    @staticmethod
    def beyond_limits(layer, ref) -> str | None:
        return Pad._too_deep(len(layer.inputs[0].dims))

    def launches(self, ins, outs):
        shape, out_shape = self.in_shapes[0], self.out_shapes[0]
        why = self._too_deep(len(shape))
        if why:  # (a plan for the GPU alone gets here without query_network)
            raise self.error(why)
        desc = np.zeros(4 * MAX_RANK, np.int32)
        for k, (o, n, s, b) in enumerate(zip(out_shape, shape, contiguous_strides(shape), self.ref.begin)):
            desc[k], desc[MAX_RANK + k], desc[2 * MAX_RANK + k], desc[3 * MAX_RANK + k] = o, n, s, b
        count = int(np.prod(out_shape))
        return [self.launch("pad_nd", [ins[0], outs[0], self.ctx.upload_ints(desc)] + i32(len(shape),
                            MODES[self.ref.mode]) + f32(self.ref.value) + i32(count), (round_up(count, 64),))]
