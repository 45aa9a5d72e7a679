"""MatMul with a constant second operand (a dense layer) -> FullyConnected.

Weights OI: TensorFlow's (I, O) transposed, or as they are with transpose_b.
transpose_a puts a Permute before it. A product of two tensors computed from the
data has no IR v2 layer."""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.ops.base import TFOp, expect_inputs
from core.front.tf.tensors import attr, describe
from core.ops.fully_connected import FullyConnected
from core.ops.shape_ops import Permute


class MatMul(TFOp):
    tf_types = ("MatMul",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)
        node.tf["transpose_a"] = attr(node, "transpose_a", "b", False)
        node.tf["transpose_b"] = attr(node, "transpose_b", "b", False)

    @staticmethod
    def evaluate(node, values):
        a, b = values
        a = a.T if node.tf["transpose_a"] else a
        b = b.T if node.tf["transpose_b"] else b
        return [np.matmul(a, b)]

    @staticmethod
    def shape(node, shapes):
        a, b = shapes
        if len(a) != 2 or len(b) != 2:
            raise ShapeError("{}: MatMul takes 2-D operands, got {} and {}.", describe(node), list(a), list(b))
        rows, inner = (a[1], a[0]) if node.tf["transpose_a"] else (a[0], a[1])
        inner_b, cols = (b[1], b[0]) if node.tf["transpose_b"] else (b[0], b[1])
        if inner != inner_b:
            raise ShapeError("{}: operands {} and {} do not multiply.", describe(node), list(a), list(b))
        return [[rows, cols]]

    @staticmethod
    def lower(node, lw):
        a, b = node.data_inputs()
        if b.soft_get("value") is None:
            raise lw.unsupported(node, "a product whose second operand is computed from the model's data (not "
                                       "weights)")
        w = np.asarray(b.value, dtype=np.float32)
        weights = w if node.tf["transpose_b"] else w.T
        lw.keep_inputs(node, a)
        lw.retype(node, FullyConnected, {"out-size": int(weights.shape[0]), "axis": 1})
        lw.add_blob(node, "weights", weights)
        if node.tf["transpose_a"]:
            lw.insert_before(node, 0, node.name + "/transpose_a", Permute, {"order": [1, 0]})
