"""Concat, Split/Slice, Crop, StridedSlice, Permute/Transpose, Tile (shape_ops.cl's
strided copy), Gather (an embedding lookup, or the data at indices the data holds)
and Reshape/Flatten (views: the output is the input's buffer, no launch)."""
from __future__ import annotations

import numpy as np

from .base import GpuKernel, i32, register, round_up

MAX_RANK = 6  # shape_ops.cl


def contiguous_strides(shape) -> list[int]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= int(d)
    return strides[::-1]


def merge_dims(shape, src_strides, dst_strides):
    """Drops size-1 dims and merges neighbours that are contiguous in both source
    and destination: fewer index divisions per element, and any rank up to the
    tensors' fits MAX_RANK in practice."""
    dims = [(int(n), int(s), int(d)) for n, s, d in zip(shape, src_strides, dst_strides) if n != 1]
    merged = []
    for n, s, d in dims:
        if merged:
            pn, ps, pd = merged[-1]
            if ps == n * s and pd == n * d:
                merged[-1] = (pn * n, s, d)
                continue
        merged.append((n, s, d))
    return merged or [(1, 1, 1)]


class _Copy(GpuKernel):
    program = "shape_ops.cl"

    def copy(self, src, dst, shape, src_strides, dst_strides, src_offset=0, dst_offset=0):
        """A Launch copying `shape` elements; its descriptor buffer is made once."""
        dims = merge_dims(shape, src_strides, dst_strides)
        if len(dims) > MAX_RANK:
            raise self.error(f"a copy over {len(dims)} non-contiguous dimensions is more than the GPU plugin's "
                             f"{MAX_RANK}")
        desc = np.ones(3 * MAX_RANK, np.int32)
        for k, (n, s, d) in enumerate(dims):
            desc[k], desc[MAX_RANK + k], desc[2 * MAX_RANK + k] = n, s, d
        count = int(np.prod(shape))
        return self.launch("copy_nd", [src, dst, self.ctx.upload_ints(desc)] +
                           i32(len(dims), count, src_offset, dst_offset), (round_up(count, 64),))


@register("Concat")
class Concat(_Copy):
    """Copies each input into its slice of the output, except the inputs in `skip`
    (their producers wrote them there: the plan's _place_concats)."""

    def launches(self, ins, outs):
        out_shape = self.out_shapes[0]
        rank = len(out_shape)
        axis = self.ref.axis + rank if self.ref.axis < 0 else self.ref.axis
        dst_strides = contiguous_strides(out_shape)
        result, offset = [], 0
        for k, (buf, shape) in enumerate(zip(ins, self.in_shapes)):
            if k not in self.skip:
                result.append(self.copy(buf, outs[0], shape, contiguous_strides(shape), dst_strides,
                                        dst_offset=offset * dst_strides[axis]))
            offset += shape[axis]
        return result


@register("Split", "Slice")
class Split(_Copy):
    def launches(self, ins, outs):
        shape = self.in_shapes[0]
        rank = len(shape)
        axis = self.ref.axis + rank if self.ref.axis < 0 else self.ref.axis
        src_strides = contiguous_strides(shape)
        result, offset = [], 0
        for buf, out_shape in zip(outs, self.out_shapes):
            result.append(self.copy(ins[0], buf, out_shape, src_strides, contiguous_strides(out_shape),
                                    src_offset=offset * src_strides[axis]))
            offset += out_shape[axis]
        return result


@register("Crop")
class Crop(_Copy):
    def launches(self, ins, outs):
        shape = self.in_shapes[0]
        slices, out_shape = self.ref._slices(self.in_shapes)
        src_strides = contiguous_strides(shape)
        offset = sum((s.start or 0) * st for s, st in zip(slices, src_strides))
        return [self.copy(ins[0], outs[0], out_shape, src_strides, contiguous_strides(out_shape), src_offset=offset)]


@register("Tile")
class Tile(_Copy):
    """np.tile along one axis: a copy that reads the axis `tiles` times (a source stride of 0 over the
    repeats) - the broadcasts of TensorFlow graphs, a causal mask's."""

    def launches(self, ins, outs):
        shape = [int(d) for d in self.in_shapes[0]]
        axis = self.ref.axis_in(self.ref.axis, len(shape))
        strides = contiguous_strides(shape)
        view = shape[:axis] + [self.ref.tiles] + shape[axis:]
        src_strides = strides[:axis] + [0] + strides[axis:]
        return [self.copy(ins[0], outs[0], view, src_strides, contiguous_strides(view))]


HALF_EXACT = 2048  # every integer up to it has an exact FP16 value: the indices a half-storage Gather can read


@register("Gather")
class Gather(GpuKernel):
    """np.take of the dictionary (the CPU kernel's table, uploaded once, or input 1) at input 0's indices
    along the axis; an index that is no integer in range gives 0 (TensorFlow's GPU Gather; the CPU plugin
    fails the request, as TensorFlow's CPU kernel)."""
    program = "shape_ops.cl"

    @staticmethod
    def _dims(layer, ref) -> tuple:
        return ref.dims if ref.table is not None else tuple(int(d) for d in layer.inputs[1].dims)

    @staticmethod
    def _inexact_in_half(layer, ref) -> str | None:
        """Why half storage cannot hold this dictionary's indices, or None."""
        size = Gather._dims(layer, ref)[ref.axis]
        if size <= HALF_EXACT + 1:
            return None
        return f"FP16 storage holds no exact index above {HALF_EXACT} (a dictionary of {size} along axis {ref.axis})"

    @staticmethod
    def beyond_limits(layer, ref) -> str | None:
        return Gather._inexact_in_half(layer, ref) if layer.precision == "FP16" else None

    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        why = self._inexact_in_half(layer, self.ref) if ctx.dtype == np.float16 else None
        if why:
            raise self.error(f"{why}: run it at FP32 (INFERENCE_PRECISION_HINT f32) or with HETERO:GPU,CPU on an "
                             f"FP16 IR")
        self._table = None if self.ref.table is None else ctx.upload(self.ref.table)

    def launches(self, ins, outs):
        axis, batch_dims = self.ref.axis, self.ref.batch_dims
        dims = self.ref.dims if self._table is not None else tuple(self.in_shapes[1])
        n, count = int(np.prod(self.in_shapes[0][batch_dims:])), int(np.prod(self.out_shapes[0]))
        inner = int(np.prod(dims[axis + 1:]))
        outer = int(np.prod(dims[:axis]))
        pre = outer // int(np.prod(dims[:batch_dims]))  # (the entries before the axis in one batch)
        table = self._table if self._table is not None else ins[1]
        return [self.launch("gather", [table, ins[0], outs[0]] + i32(n, dims[axis], inner, count, max(pre, 1)),
                            (round_up(count, 64),))]


@register("StridedSlice")
class StridedSlice(_Copy):
    """A copy reading every stride-th element from begin (strides may be negative: a reversal)."""

    def launches(self, ins, outs):
        shape = self.in_shapes[0]
        strides = contiguous_strides(shape)
        slices = self.ref._slices(shape)
        offset = sum((s.start or 0) * st for s, st in zip(slices, strides))
        src_strides = [(s.step or 1) * st for s, st in zip(slices, strides)]
        out_shape = self.out_shapes[0]
        return [self.copy(ins[0], outs[0], out_shape, src_strides, contiguous_strides(out_shape), src_offset=offset)]


@register("Permute", "Transpose")
class Permute(_Copy):
    places_output = True  # may write into its slice of a Concat's buffer (SSD's heads)

    @staticmethod
    def beyond_limits(layer, ref) -> str | None:
        shape = [2] + [int(d) for d in layer.inputs[0].dims[1:]]  # (any batch: dim 0 counts)
        order = ref._order(len(shape))
        out_shape = [shape[a] for a in order]
        strides = contiguous_strides(shape)
        dims = merge_dims(out_shape, [strides[a] for a in order], contiguous_strides(out_shape))
        if len(dims) > MAX_RANK:
            return f"a copy over {len(dims)} non-contiguous dimensions (the GPU plugin copies {MAX_RANK})"
        return None

    def launches(self, ins, outs):
        shape = self.in_shapes[0]
        order = self.ref._order(len(shape))
        in_strides = contiguous_strides(shape)
        out_shape = self.out_shapes[0]
        dst_strides = contiguous_strides(out_shape)
        offset = 0
        if self.place is not None:  # (element offset, stride between images) in the Concat's buffer
            offset, dst_strides[0] = self.place
        return [self.copy(ins[0], outs[0], out_shape, [in_strides[a] for a in order], dst_strides,
                          dst_offset=offset)]


@register("Reshape", "Flatten")
class View(GpuKernel):
    view = True

    def launches(self, ins, outs):
        return []
