"""FullyConnected (Caffe InnerProduct; weights OI) and MatMul (a product of two tensors)."""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs
from ir.matmul import matmul_shape as ir_matmul_shape


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


def matmul_shape(a, b, transpose_a: bool, transpose_b: bool, what: str) -> np.ndarray:
    """ir/matmul.py's shape, its complaint a ShapeError naming `what`."""
    try:
        return np.array(ir_matmul_shape(a, b, transpose_a, transpose_b), dtype=np.int64)
    except ValueError as exc:
        raise ShapeError("{}: {}.", what, str(exc)) from None


class MatMul(Op):
    """numpy's matmul of two tensors (OpenVINO's MatMul): transposes of the last two axes, broadcast batches."""
    op = "MatMul"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "MatMul", "op": self.op, "transpose_a": False, "transpose_b": False,
                                 "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("MatMul")

    @staticmethod
    def infer(node):
        a, b = (node.in_node(i).shape for i in (0, 1))
        node.out_node(0).shape = matmul_shape(a, b, node.transpose_a, node.transpose_b,
                                              "MatMul '{}'".format(node.name))
