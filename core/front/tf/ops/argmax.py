"""ArgMax (the index of the largest value along an axis, the axis dropped): the
catalog's ArgMax over that axis (top_k 1) with TensorFlow's ties (the first index),
then a Reshape that drops the axis; ArgMin the same of the negated input (a Power).
TopKV2 (the k largest along the last axis, best first, and their indices): two
ArgMax layers over that axis, one of them out_max_val. The IR holds an index as a
float."""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.lowering import reshape_node
from core.front.tf.ops.base import TFOp, const_input, expect_inputs, normalize_axis
from core.front.tf.ops.concat_split import tensor_name
from core.front.tf.tensors import describe
from core.ops.activation import Power
from core.ops.argmax import ArgMax as IRArgMax
from core.ops.shape_ops import Reshape


def _axis(node, rank):
    return normalize_axis(node, int(const_input(node, 1, "axis").ravel()[0]), rank)


class ArgMax(TFOp):
    tf_types = ("ArgMax", "ArgMin")

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def evaluate(node, values):
        find = np.argmax if node.tf_op == "ArgMax" else np.argmin
        return [find(values[0], axis=_axis(node, values[0].ndim)).astype(np.int64)]

    @staticmethod
    def shape(node, shapes):
        shape = [int(d) for d in shapes[0]]
        axis = _axis(node, len(shape))
        return [shape[:axis] + shape[axis + 1:]]

    @staticmethod
    def lower(node, lw):
        if node.tf_op == "ArgMin":  # the largest of -x is the smallest of x, ties to the first index alike
            lw.insert_before(node, 0, node.name + "/negated", Power, {"power": 1.0, "scale": -1.0, "shift": 0.0})
        x = node.data_inputs()[0]
        shape = lw.tf_shape(x)
        axis = _axis(node, len(shape))
        kept = shape.copy()
        kept[axis] = 1
        lw.keep_inputs(node, x)
        lw.retype(node, IRArgMax, {"top_k": 1, "out_max_val": False, "axis": lw.ir_axis(x, axis), "ties": "first"})
        reshape = lw.insert_after(node, node.name + "/argmax", Reshape, {})
        node.out_node(0).attrs.update({"tf_shape": kept, "nchw": lw.nchw(x)})
        reshape_node(lw, reshape)


class TopK(TFOp):
    """tf.math.top_k: values and indices of the k largest along the last axis, best first (TensorFlow's
    ties: the lower index first; with sorted=False the order is TensorFlow's to choose, so best first is one)."""
    tf_types = ("TopKV2",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def _k(node, shape) -> int:
        k = int(const_input(node, 1, "k").ravel()[0])
        if not len(shape) or not 0 <= k <= int(shape[-1]):
            raise ShapeError("{}: k {} is not within the last axis of {}.", describe(node), k, list(shape))
        return k

    @staticmethod
    def evaluate(node, values):
        x = values[0]
        order = np.argsort(-x, axis=-1, kind="stable")[..., :TopK._k(node, x.shape)]
        return [np.take_along_axis(x, order, axis=-1), order.astype(np.int32)]

    @staticmethod
    def shape(node, shapes):
        shape = [int(d) for d in shapes[0]]
        out = shape[:-1] + [TopK._k(node, shape)]
        return [out, out]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        k = TopK._k(node, lw.tf_shape(x))
        if k == 0:
            raise lw.unsupported(node, "k is 0 (an empty result)")
        attrs = {"top_k": k, "axis": lw.ir_axis(x, -1), "ties": "first"}
        for port, out in list(node.out_nodes().items()):
            lw.graph.remove_edge(node.id, out.id)
            part = lw.new_op(tensor_name(node, port), IRArgMax, dict(attrs, out_max_val=port == 0))
            lw.graph.connect(x, part, inp=0)
            lw.graph.connect(part, out, out=0)
        lw.graph.remove_node(node.id)
