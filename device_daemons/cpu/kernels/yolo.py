"""RegionYolo and ReorgYolo (YOLO v2/v3 heads).

RegionYolo: the input [N, R*(coords+1+classes), H, W] holds R regions (R = num,
or len(mask) when do_softmax is 0). For each region: logistic on x, y (the
first two coords) and on the objectness; classes get a softmax over the class
axis (do_softmax=1) or a logistic each (do_softmax=0). Output: the input shape,
flattened from `axis` to `end_axis` when do_softmax is 1 (YOLO v2).

ReorgYolo (stride s): [N, C, H, W] -> [N, C*s*s, H/s, W/s] with
out[n, (dy*s + dx)*C + c, y, x] = in[n, c, y*s + dy, x*s + dx].
"""
from __future__ import annotations

import numpy as np

from .activation import sigmoid
from .base import Kernel, register


@register("RegionYolo")
class RegionYolo(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.coords, self.classes, self.num, self.do_softmax = a["coords"], a["classes"], a["num"], a["do_softmax"]
        self.mask = a["mask"] or []
        self.axis, self.end_axis = a["axis"], a["end_axis"]
        self.regions = self.num if self.do_softmax or not self.mask else len(self.mask)
        if self.coords < 2 or self.classes <= 0 or self.regions <= 0:
            raise self.error("coords must be >= 2 and classes, num must be positive")

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1, rank=4)
        shape = list(input_shapes[0])
        need = self.regions * (self.coords + 1 + self.classes)
        if shape[1] != need:
            raise self.error(f"input has {shape[1]} channels; {self.regions} regions x (coords {self.coords} + 1 + "
                             f"classes {self.classes}) = {need} are needed")
        if not self.do_softmax:
            return [tuple(shape)]
        rank = len(shape)
        a = self.axis % rank
        e = self.end_axis % rank
        return [tuple(shape[:a] + [int(np.prod(shape[a:e + 1]))] + shape[e + 1:])]

    def forward(self, inputs):
        x = inputs[0]
        n, _, h, w = x.shape
        entry = self.coords + 1 + self.classes
        out = x.reshape(n, self.regions, entry, h, w).copy()
        sigmoid(out[:, :, 0:2], out[:, :, 0:2])
        obj = out[:, :, self.coords:self.coords + 1]
        sigmoid(obj, obj)
        cls = out[:, :, self.coords + 1:]
        if self.do_softmax:
            cls -= cls.max(axis=2, keepdims=True)
            np.exp(cls, out=cls)
            cls /= cls.sum(axis=2, keepdims=True)
        else:
            sigmoid(cls, cls)
        return [out.reshape(self.getMemoryShapes([x.shape])[0])]


@register("ReorgYolo")
class ReorgYolo(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.stride = self.attrs["stride"]
        if self.stride <= 0:
            raise self.error(f"stride {self.stride} must be positive")

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1, rank=4)
        n, c, h, w = input_shapes[0]
        s = self.stride
        if h % s or w % s:
            raise self.error(f"input {list(input_shapes[0])} is not divisible by stride {s}")
        return [(n, c * s * s, h // s, w // s)]

    def forward(self, inputs):
        x = inputs[0]
        n, c, h, w = x.shape
        s = self.stride
        v = x.reshape(n, c, h // s, s, w // s, s).transpose(0, 3, 5, 1, 2, 4)
        out = np.empty((n, c * s * s, h // s, w // s), np.float32)
        out.reshape(v.shape)[...] = v  # always a new array, even for stride 1
        return [out]
