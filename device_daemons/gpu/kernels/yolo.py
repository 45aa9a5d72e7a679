"""RegionYolo (yolo.cl: a work item a region's position) and ReorgYolo (shape_ops.cl's
strided copy over the view the CPU kernel transposes), the CPU kernels' yolo.py family."""
from __future__ import annotations

from .base import GpuKernel, i32, register, round_up
from .shape_ops import _Copy, contiguous_strides


@register("RegionYolo")
class RegionYolo(GpuKernel):
    program = "yolo.cl"
    inplace = True  # a work item reads each of its values before it writes it, and only its own

    def launches(self, ins, outs):
        n, _, h, w = self.in_shapes[0]
        ref = self.ref
        plane = h * w
        return [self.launch("region_yolo", [ins[0], outs[0]] + i32(ref.regions, ref.coords, ref.classes, plane,
                                                                     int(ref.do_softmax)),
                            (round_up(plane, 8), ref.regions, n))]


@register("ReorgYolo")
class ReorgYolo(_Copy):
    def launches(self, ins, outs):
        n, c, h, w = self.in_shapes[0]
        s = self.ref.stride
        view = [n, c, h // s, s, w // s, s]
        strides = contiguous_strides(view)
        order = (0, 3, 5, 1, 2, 4)
        shape = [view[a] for a in order]
        return [self.copy(ins[0], outs[0], shape, [strides[a] for a in order], contiguous_strides(shape))]
