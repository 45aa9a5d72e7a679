"""Reshape and Flatten on oneDNN: a view of the input tensor with the new dims where
oneDNN can describe its layout so (dnnl_memory_desc_reshape: plain layouts, and
blocked ones whose blocked dims are not split or merged); no primitive runs and
nothing is copied. A blocked input it cannot view is read plain (the compiler's
reorder), then viewed."""
from __future__ import annotations

from .library import DnnlError
from .op import NativeOp, Unsupported, register
from .primitives import Desc


@register("Reshape", "Flatten")
class ReshapeOp(NativeOp):
    view = True  # the compiler makes its output an alias of its input (compiler.AliasTensor)

    def create(self, in_descs, in_shapes, out_shapes):
        src = in_descs[0]
        if src is None:
            raise Unsupported("its input is a numpy array: numpy reshapes it as a view")
        self.dt = src.dt
        try:
            return [src], [src.reshaped(out_shapes[0])]
        except DnnlError:
            pass
        # a blocked layout whose blocks the new dims split: reordered to plain first (one
        # oneDNN reorder, where numpy would take an export, a copy and an import)
        plain = Desc.plain(self.d, in_shapes[0], src.dt)
        try:
            return [plain], [plain.reshaped(out_shapes[0])]
        except DnnlError:
            raise Unsupported(f"oneDNN cannot view its {src.layout()} input as {list(out_shapes[0])}") from None

    def bind(self, ins, outs, scratch):
        return []
