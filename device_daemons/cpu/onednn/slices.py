"""Crop and the outputs of Split on oneDNN. A part that is one block of its input's plain
memory (ones before some axis, whole axes after it: an LSTM's gates at batch 1, a step of
a sequence) is a view - the compiler's alias at that byte offset, nothing runs. Any other
part is one reorder of the input's memory described as that part (a sub-memory: the
input's strides, an offset; oneDNN's way to read a slice: not every primitive honours a
sub-memory's offset, a reorder does) into a dense tensor. On numpy a Split's parts came with a Reorder of the
input to numpy, the slicing and an import of every part back (an unrolled LSTM: six
Python steps per time step that broke the oneDNN runs into pieces). A Split of n outputs
is compiled as n steps of one output each (`split_parts`); a blocked input is read plain
(the compiler's reorder)."""
from __future__ import annotations

import dataclasses
import math

from ..kernels.shape_ops import Split
from .op import NativeOp, Unsupported, register
from .primitives import PLAIN_TAGS, Attr, Desc, reorder_pd


class SplitPart:
    """Output `index` of a Split as a kernel of its own: numpy's slice of the input (when oneDNN cannot view it)."""

    def __init__(self, split: Split, index: int):
        self.split, self.index = split, index
        self.layer = split.layer

    def begins(self, shape) -> list[int]:
        axis = self.split.axis_in(self.split.axis, len(shape))
        begins = [0] * len(shape)
        begins[axis] = sum(self.split.sizes[:self.index])
        return begins

    def forward(self, inputs):
        return [self.split.forward(inputs)[self.index]]  # (numpy's parts are views: the others cost nothing)


def split_parts(steps: list) -> list:
    """The steps with each Split of several outputs (our numpy kernel's, not a custom one) as one step per output;
    the last one frees what the Split freed."""
    out = []
    for step in steps:
        if type(step.kernel) is not Split or step.is_custom or len(step.out_slots) < 2:
            out.append(step)
            continue
        last = len(step.out_slots) - 1
        out += [dataclasses.replace(step, kernel=SplitPart(step.kernel, k), out_slots=(slot,),
                                    free=step.free if k == last else ()) for k, slot in enumerate(step.out_slots)]
    return out


def contiguous_offset(shape, part, begins) -> int | None:
    """The offset (in elements) of a part of a row-major tensor when the part is one block of
    its memory (ones before some axis, whole axes after it), else None."""
    n = len(shape)
    for axis in range(n):
        if all(part[i] == 1 for i in range(axis)) and all(part[i] == shape[i] for i in range(axis + 1, n)):
            strides = [math.prod(shape[i + 1:]) for i in range(n)]
            return sum(b * s for b, s in zip(begins, strides))
    return None


@register("Crop", "Split", "Slice")
class SliceOp(NativeOp):
    def create(self, in_descs, in_shapes, out_shapes):
        if in_descs[0] is None:
            raise Unsupported("its input is a numpy array: numpy slices it as a view")
        shape = list(in_shapes[0])
        if len(shape) not in PLAIN_TAGS:
            raise Unsupported(f"oneDNN takes tensors of 1 to {max(PLAIN_TAGS)} dimensions, not {len(shape)}")
        if isinstance(self.kernel, SplitPart):
            begins = self.kernel.begins(shape)
        else:  # (Crop: its kernel's slices, as numpy cuts them)
            slices, _ = self.kernel._slices(in_shapes)
            begins = [s.start or 0 for s in slices]
        src = in_descs[0] if in_descs[0].unblocked() else Desc.plain(self.d, shape, in_descs[0].dt)
        self.dt = src.dt
        offset = contiguous_offset(shape, out_shapes[0], begins)
        if offset is not None and src == Desc.plain(self.d, shape, src.dt):
            # one block of the input's memory: the part is a view of it, nothing runs
            self.view, self.view_offset = True, offset * (2 if src.dt == "bf16" else 4)
            return [src], [Desc.plain(self.d, out_shapes[0], src.dt)]
        self.src_view = src.part(out_shapes[0], begins)
        out = Desc.plain(self.d, out_shapes[0], self.out_dt())
        self.pd = reorder_pd(self.d, Attr(self.d), self.src_view, out)
        return [src], [out]

    def bind(self, ins, outs, scratch):  # (not called for a view)
        # (ins[0]: the input's memory described as the part - the compiler's alias)
        return [self.primitive(self.pd, {"DNNL_ARG_FROM": ins[0], "DNNL_ARG_TO": outs[0]}, scratch)]
