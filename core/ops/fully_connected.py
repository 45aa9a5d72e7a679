"""FullyConnected (Caffe InnerProduct; weights OI)."""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs


class FullyConnected(Op):
    op = "FullyConnected"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "FullyConnected", "op": self.op, "axis": 1, "infer": self.infer}, attrs)

    def backend_attrs(self):
        # axis is written only when it is not the IR default (flatten from 1)
        return ir_attrs("FullyConnected", axis=lambda n: None if n.axis == 1 else n.axis)

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        axis = node.axis if node.axis >= 0 else len(shape) + node.axis
        node.axis = axis
        in_size = int(np.prod(shape[axis:]))
        out_size = int(node["out-size"])
        for name, blob, _ in node.blob_inputs():
            if name == "weights" and blob.value.size != in_size * out_size:
                raise ShapeError(
                    "FullyConnected '{}' has {} weights but an input of shape {} needs {} ({} outputs x {} "
                    "inputs). The input shape does not agree with the weights: check --input_shape.",
                    node.name, blob.value.size, list(shape), in_size * out_size, out_size, in_size)
        node.out_node(0).shape = np.array([*shape[:axis], out_size], dtype=np.int64)
