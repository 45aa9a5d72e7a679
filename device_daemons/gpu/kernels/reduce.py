"""ReduceSum, ReduceMean, ReduceMax, ReduceMin (one work item an output element,
reducing over any set of axes), CumSum and ArgMax with top_k 1 (one work item a
line along the axis): reduce.cl, the CPU kernels' reduce.py and argmax.py families.
Sums accumulate in float (the CPU kernels in float64: the tests hold them to the
CPU plan)."""
from __future__ import annotations

import numpy as np

from .base import GpuKernel, i32, register, round_up
from .shape_ops import contiguous_strides

MAX_RANK = 6  # reduce.cl's RED_RANK
OPS = {"ReduceSum": 0, "ReduceMean": 1, "ReduceMax": 2, "ReduceMin": 3}


def _merged(dims) -> list[tuple[int, int]]:
    """(size, stride) pairs without size-1 dims, neighbours merged where one continues the other."""
    merged = []
    for n, s in ((int(n), int(s)) for n, s in dims if n != 1):
        if merged and merged[-1][1] == n * s:
            merged[-1] = (merged[-1][0] * n, s)
        else:
            merged.append((n, s))
    return merged


def _split(shape, axes) -> tuple[list, list]:
    """The kept and the reduced (size, input stride) pairs of a reduction of `shape` over `axes`."""
    strides = contiguous_strides(shape)
    kept = _merged([(n, s) for a, (n, s) in enumerate(zip(shape, strides)) if a not in axes])
    reduced = _merged([(n, s) for a, (n, s) in enumerate(zip(shape, strides)) if a in axes])
    return kept, reduced


@register(*OPS)
class Reduce(GpuKernel):
    program = "reduce.cl"

    @staticmethod
    def beyond_limits(layer, ref) -> str | None:
        shape = [int(d) for d in layer.inputs[0].dims]
        kept, reduced = _split(shape, set(ref._axes(len(shape))))
        if max(len(kept), len(reduced)) > MAX_RANK:
            return f"a reduction over more than {MAX_RANK} non-contiguous dimensions"
        return None

    def launches(self, ins, outs):
        shape = self.in_shapes[0]
        kept, reduced = _split(shape, set(self.ref._axes(len(shape))))
        if max(len(kept), len(reduced)) > MAX_RANK:
            raise self.error(f"a reduction over more than {MAX_RANK} non-contiguous dimensions")
        desc = np.ones(4 * MAX_RANK, np.int32)
        for k, (n, s) in enumerate(kept):
            desc[k], desc[MAX_RANK + k] = n, s
        for k, (n, s) in enumerate(reduced):
            desc[2 * MAX_RANK + k], desc[3 * MAX_RANK + k] = n, s
        count = int(np.prod(self.out_shapes[0]))
        size = int(np.prod([n for n, _ in reduced]))
        return [self.launch("reduce_nd", [ins[0], outs[0], self.ctx.upload_ints(desc)] +
                            i32(len(kept), len(reduced), size, OPS[self.layer.type], count),
                            (round_up(count, 64),))]


@register("CumSum")
class CumSum(GpuKernel):
    program = "reduce.cl"

    def launches(self, ins, outs):
        shape = self.in_shapes[0]
        axis = self.ref._axis(len(shape))
        size, inner = int(shape[axis]), int(np.prod(shape[axis + 1:]))
        lines = int(np.prod(shape)) // max(size, 1)
        return [self.launch("cumsum", [ins[0], outs[0]] + i32(size, inner, lines, self.ref.exclusive,
                                                                 self.ref.reverse), (round_up(lines, 64),))]


@register("ArgMax")
class ArgMax(GpuKernel):
    """top_k 1 only (a sort otherwise: HETERO runs it on the CPU)."""
    program = "reduce.cl"

    @staticmethod
    def beyond_limits(layer, ref) -> str | None:
        return f"ArgMax with top_k {ref.top_k} (a sort; the GPU plugin finds the maximum)" if ref.top_k != 1 else None

    def launches(self, ins, outs):
        shape = self.in_shapes[0]
        ref = self.ref
        if ref.axis is not None:
            axis = ref.axis_in(ref.axis, len(shape))
            size, inner = int(shape[axis]), int(np.prod(shape[axis + 1:]))
            mode = 1 if ref.out_max_val else 0
        else:  # (each item's values flattened; with out_max_val its index, then its value)
            size, inner = int(np.prod(shape[1:])), 1
            mode = 2 if ref.out_max_val else 0
        lines = int(np.prod(shape)) // max(size, 1)
        return [self.launch("argmax", [ins[0], outs[0]] + i32(size, inner, lines, ref.first, mode),
                            (round_up(lines, 64),))]
