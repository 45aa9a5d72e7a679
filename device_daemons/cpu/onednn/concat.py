"""Concat on oneDNN: the inputs in whatever layouts their producers left them, the
output in the layout the library picks (blocked when the inputs are). When every
input is a numpy array (numpy layers made them: SSD's flattened heads) the layer
stays numpy: importing each input costs more than numpy's copy."""
from __future__ import annotations

from .op import NativeOp, Unsupported, register
from .primitives import Desc, concat_pd


@register("Concat")
class ConcatOp(NativeOp):
    def create(self, in_descs, in_shapes, out_shapes):
        if all(desc is None for desc in in_descs):
            raise Unsupported("its inputs are numpy arrays: numpy concatenates them without reorders")
        d = self.d
        rank = len(in_shapes[0])
        axis = self.kernel.axis + rank if self.kernel.axis < 0 else self.kernel.axis
        self.dt = next(desc.dt for desc in in_descs if desc is not None)
        # every input in the type of the first oneDNN one (a reorder converts the others)
        srcs = [desc.retyped(self.dt) if desc is not None else Desc.plain(d, shape, self.dt)
                for desc, shape in zip(in_descs, in_shapes)]
        self.pd = concat_pd(d, self.attr(), None, axis, srcs)
        return srcs, [self.pd.md("dst_md", dims=out_shapes[0])]

    def bind(self, ins, outs, scratch):
        args = {f"DNNL_ARG_MULTIPLE_SRC+{i}": m for i, m in enumerate(ins)}
        args["DNNL_ARG_DST"] = outs[0]
        return [self.primitive(self.pd, args, scratch)]
