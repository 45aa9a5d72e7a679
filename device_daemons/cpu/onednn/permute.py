"""Permute (a transpose) on oneDNN: where the input's layout is unblocked (abcd, acdb, a
strided view), a view - the input's memory described with the output's axes, nothing
copied (ConvNeXt's NHWC <-> NCHW around its LayerNorm and dense layers, attention's head
transposes, which its MatMuls read as they are); else one reorder from the input's
blocked layout straight into the output's plain layout - the output's memory described
with the input's axes (its strides permuted: dst_view) - so the Reorder to numpy,
numpy's copy and the Import after it (SSD heads: a convolution, Permute, Reshape,
Concat) become one primitive and what follows stays on oneDNN. A numpy array's Permute (a
network input of 5-D volumes: NDHWC -> NCDHW, into bf16; a sequence made time-major) is that
one reorder too."""
from __future__ import annotations

from .op import NativeOp, Unsupported, register
from .primitives import PLAIN_TAGS, Attr, Desc, reorder_pd


@register("Permute")
class PermuteOp(NativeOp):
    def create(self, in_descs, in_shapes, out_shapes):
        self.view = False  # (decided anew at each create)
        if in_descs[0] is None:
            # a numpy array (a network input, a numpy layer's output) is plain f32, which oneDNN reads where it
            # is (compiler: BoundInput, BindStep): one reorder transposes it (into bf16: and converts it), and what
            # reads the result stays among the oneDNN steps (an unrolled recurrence's slices of its time-major
            # input: numpy's transpose made every slice a numpy step and an import); a network output of a numpy
            # array is numpy's transpose, the one copy either way
            if self.out_f32 or len(in_shapes[0]) not in PLAIN_TAGS:
                raise Unsupported("its input is a numpy array: numpy transposes it")
            src = Desc.plain(self.d, in_shapes[0])
        else:
            src = self.follow(in_descs[0], in_shapes[0])
        order = self.kernel._order(len(in_shapes[0]))
        out = Desc.plain(self.d, out_shapes[0], self.out_dt())
        if src.dt == out.dt and in_descs[0] is not None:  # (a numpy array is not viewed: it is the caller's)
            # input axis order[i] is output axis i: the input's memory so described is the output when both are
            # unblocked layouts (NCHW with C innermost read as NHWC and back, ConvNeXt's around its LayerNorm and
            # dense layers): the Permute is a view, nothing is copied; a reader that wants another layout
            # reorders it (the one copy the Permute would have made)
            inverse = [0] * len(order)
            for i, axis in enumerate(order):
                inverse[axis] = i
            seen = src.permuted(inverse)
            if seen == out or src.unblocked():
                self.view = True
                return [src], [seen]
        self.dst_view = out.permuted(order)  # output axis i is input axis order[i]
        self.pd = reorder_pd(self.d, Attr(self.d), src, self.dst_view)
        return [src], [out]

    def bind(self, ins, outs, scratch):
        # (outs[0]: the output tensor's memory described as dst_view - the compiler's alias)
        return [self.primitive(self.pd, {"DNNL_ARG_FROM": ins[0], "DNNL_ARG_TO": outs[0]}, scratch)]
