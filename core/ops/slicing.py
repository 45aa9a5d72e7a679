"""Slices of a tensor: CropRange (the catalog's Crop in its third form: axis,
crop_begin, crop_end) and StridedSlice (own type: begin/stride/size per axis).

StridedSlice (not in the IR v2 catalog): attributes `begin`, `stride`, `size`,
one value per input axis; output element i of an axis is input element
begin + i * stride (stride may be negative). Front ends resolve TensorFlow's
masks and negative indices into these before writing it.
"""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs


class CropRange(Op):
    """IR Crop: along each axis in `axis`, drop crop_begin values at the start and crop_end at the end."""
    op = "CropRange"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Crop", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Crop")

    @staticmethod
    def infer(node):
        shape = np.array(node.in_node(0).shape, dtype=np.int64)
        for axis, begin, end in zip(node.axis, node.crop_begin, node.crop_end):
            if not 0 <= axis < len(shape) or begin < 0 or end < 0 or begin + end >= shape[axis]:
                raise ShapeError("Crop '{}': cropping {} + {} values off axis {} of {} leaves nothing.", node.name,
                                 begin, end, axis, list(shape))
            shape[axis] -= begin + end
        node.out_node(0).shape = shape


class StridedSlice(Op):
    op = "StridedSlice"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "StridedSlice", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("StridedSlice")

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        if not len(node.begin) == len(node.stride) == len(node.size) == len(shape):
            raise ShapeError("StridedSlice '{}' needs begin, stride and size for each of the {} axes.", node.name,
                             len(shape))
        for axis, (b, s, n) in enumerate(zip(node.begin, node.stride, node.size)):
            last = b + (n - 1) * s
            if s == 0 or n <= 0 or not (0 <= b < shape[axis] and 0 <= last < shape[axis]):
                raise ShapeError("StridedSlice '{}': begin {} stride {} size {} leave axis {} of {}.", node.name, b, s,
                                 n, axis, list(shape))
        node.out_node(0).shape = np.array(node.size, dtype=np.int64)
