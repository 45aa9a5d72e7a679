"""ArgMax (Caffe semantics for the output shape)."""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs


class ArgMax(Op):
    op = "ArgMax"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "ArgMax", "op": self.op, "top_k": 1, "out_max_val": False,
                                 "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("ArgMax")

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        top_k = int(node.top_k)
        axis = node.soft_get("axis")
        if axis is not None:
            axis = int(axis) % len(shape)
            node.axis = axis
            if top_k > shape[axis]:
                raise ShapeError("ArgMax '{}': top_k {} exceeds axis {} of size {}.", node.name, top_k, axis,
                                 shape[axis])
            out = np.array(shape, dtype=np.int64)
            out[axis] = top_k
        else:
            if top_k > int(np.prod(shape[1:])):
                raise ShapeError("ArgMax '{}': top_k {} exceeds the {} values per item.", node.name, top_k,
                                 int(np.prod(shape[1:])))
            out = np.ones(max(3, len(shape)), dtype=np.int64)
            out[0] = shape[0]
            out[1] = 2 if node.out_max_val else 1
            out[2] = top_k
        node.out_node(0).shape = out
