"""ReduceSum, ReduceMean, ReduceMax, ReduceMin (one work item an output element,
reducing over any set of axes), CumSum and ArgMax with top_k 1 (one work item a
line along the axis): reduce.cl, the CPU kernels' reduce.py and argmax.py families.
Sums accumulate in float (the CPU kernels in float64: the tests hold them to the
CPU plan)."""
from __future__ import annotations

import numpy as np

from .base import GpuKernel, i32, register, round_up
from .shape_ops import contiguous_strides, merge_dims

MAX_RANK = 6  # reduce.cl's RED_RANK
OPS = {"ReduceSum": 0, "ReduceMean": 1, "ReduceMax": 2, "ReduceMin": 3}


def _split(shape, axes) -> tuple[list, list]:
    """The kept and the reduced (size, input stride) pairs of a reduction of `shape` over `axes`, size-1 dims
    dropped and contiguous neighbours merged."""
    strides = contiguous_strides(shape)

    def merged(take):
        dims = [(n, s) for a, (n, s) in enumerate(zip(shape, strides)) if take(a)]
        return [(n, s) for n, s, _ in merge_dims([n for n, _ in dims], [s for _, s in dims], [s for _, s in dims])]
    return merged(lambda a: a not in axes), merged(lambda a: a in axes)


def _too_deep(kept, reduced) -> str | None:
    if max(len(kept), len(reduced)) > MAX_RANK:
        return f"a reduction over more than {MAX_RANK} non-contiguous dimensions"
    return None


@register(*OPS)
class Reduce(GpuKernel):
    program = "reduce.cl"

    @staticmethod
    def beyond_limits(layer, ref) -> str | None:
        shape = [int(d) for d in layer.inputs[0].dims]
        return _too_deep(*_split(shape, set(ref._axes(len(shape)))))

    def launches(self, ins, outs):
        shape = self.in_shapes[0]
        kept, reduced = _split(shape, set(self.ref._axes(len(shape))))
        why = _too_deep(kept, reduced)
        if why:
            raise self.error(why)
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
        axis = self.ref._axis(len(shape))  # (the CPU kernel's check)
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
