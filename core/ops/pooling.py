"""Pooling (IR: Pooling), with Caffe's ceil rounding and global pooling."""
import numpy as np

from core.errors import ShapeError
from core.ops.convolution import check_rank, end_pad_getter, pad_end
from core.ops.op import Op, check_ranges, ir_attrs
from ir.pooling import pooled_size as ir_pooled_size


def pooled_size(size, kernel, stride, pad, rounding, end=None):
    """ir/pooling.py's sizes; `end`: the bottom/right padding when it differs from `pad`
    (TensorFlow's SAME, with floor rounding)."""
    return ir_pooled_size(size, kernel, stride, pad, pad if end is None else end, rounding == "ceil")


class Pooling(Op):
    op = "Pooling"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Pooling", "op": self.op, "rounding_type": "ceil",
                                 "global_pool": False, "exclude-pad": False, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Pooling", pad_end=end_pad_getter)

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        if node.global_pool:
            # the IR has no global flag: the kernel becomes the whole plane (volume)
            node.kernel = np.array(shape[2:], dtype=np.int64)
            node.pad = np.zeros(len(shape) - 2, dtype=np.int64)
            node.pad_end = None
            node.stride = np.ones(len(shape) - 2, dtype=np.int64)
        check_rank(node, shape, "Pooling")
        check_ranges(node, "Pooling", ("kernel", "stride", "pad", "pad_end"))
        if np.any(np.maximum(node.pad, pad_end(node)) >= np.asarray(node.kernel)):
            raise ShapeError("Pooling '{}': padding {} must be smaller than the kernel {}.", node.name,
                             list(node.pad), list(node.kernel))
        spatial = pooled_size(shape[2:], node.kernel, node.stride, node.pad, node.rounding_type, pad_end(node))
        if np.any(spatial <= 0):
            raise ShapeError("Pooling '{}': input {} is smaller than the kernel {}.", node.name, list(shape),
                             list(node.kernel))
        node.out_node(0).shape = np.array([shape[0], shape[1], *spatial], dtype=np.int64)
