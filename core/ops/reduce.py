"""Reductions (own types; the IR v2 catalog only has global pooling): ReduceMean,
ReduceSum, ReduceMax, ReduceMin; and CumSum, the running sum along `axis`
(`exclusive`: without the element itself, `reverse`: from the end).

Attributes: `axes` (the reduced axes, comma-separated, IR layout) and
`keep_dims` (1: reduced axes stay with size 1; 0: they are removed). Front ends
use Pooling instead where the reduction is a global average/max over H and W.
"""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs


class _Reduce(Op):
    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": self.op, "op": self.op, "keep_dims": False, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs(self.op)

    @staticmethod
    def infer(node):
        shape = np.array(node.in_node(0).shape, dtype=np.int64)
        rank = len(shape)
        axes = sorted({int(a) % rank for a in node.axes}) if rank else []
        if not axes or any(not -rank <= int(a) < rank for a in node.axes):
            raise ShapeError("{} '{}': axes {} do not fit a {}-D input.", node.op, node.name, list(node.axes), rank)
        node.axes = axes
        if node.keep_dims:
            shape[axes] = 1
        else:
            shape = np.delete(shape, axes)
        node.out_node(0).shape = shape


class ReduceMean(_Reduce):
    op = "ReduceMean"


class ReduceSum(_Reduce):
    op = "ReduceSum"


class ReduceMax(_Reduce):
    op = "ReduceMax"


class ReduceMin(_Reduce):
    op = "ReduceMin"


class CumSum(Op):
    op = "CumSum"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": self.op, "op": self.op, "exclusive": False, "reverse": False,
                                 "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs(self.op)

    @staticmethod
    def infer(node):
        shape = np.array(node.in_node(0).shape, dtype=np.int64)
        rank = len(shape)
        if not -rank <= int(node.axis) < rank:
            raise ShapeError("CumSum '{}': axis {} does not fit a {}-D input.", node.name, node.axis, rank)
        node.axis = int(node.axis) % rank
        node.out_node(0).shape = shape
