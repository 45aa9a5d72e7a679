"""MaxPool, AvgPool (and the V2 forms with ksize/strides as constant inputs).

Floor rounding with TensorFlow's SAME/VALID pads (pad-b / pad-r where SAME pads
more at the end). TensorFlow's SAME average divides by the pixels inside the
image only: exclude-pad="true". A zero Pad before the pooling may have been
folded in (core/front/tf/patterns.py): then the average counts the padded
zeros, exclude-pad="false".
"""
from __future__ import annotations

import numpy as np

from core.front.tf.ops.base import TFOp, const_input, expect_inputs
from core.front.tf.ops.conv import read_window_attrs, window_pads
from core.front.tf.tensors import describe
from core.errors import Error, ShapeError
from core.ops.pooling import Pooling


def _pair_from_input(node, port, what):
    values = const_input(node, port, what).astype(np.int64).ravel()
    if len(values) != 4 or values[0] != 1 or values[3] != 1 or values.min() <= 0:
        raise Error("{}: {} {} must be 4 positive values with 1 for N and C.", describe(node), what, list(values))
    return values[1:3]


class Pool(TFOp):
    tf_types = ("MaxPool", "AvgPool", "MaxPoolV2")

    @staticmethod
    def extract(node):
        if node.tf_op == "MaxPoolV2":
            expect_inputs(node, 3)
            read_window_attrs(node)
        else:
            expect_inputs(node, 1)
            read_window_attrs(node, kernel_attr="ksize")

    @staticmethod
    def shape(node, shapes):
        x = shapes[0]
        if len(x) != 4:
            raise ShapeError("{}: the input {} must be 4-D (NHWC).", describe(node), list(x))
        if node.tf_op == "MaxPoolV2":
            node.tf["kernel"] = _pair_from_input(node, 1, "ksize")
            node.tf["strides"] = _pair_from_input(node, 2, "strides")
        out, begin, end = window_pads(node, x[1:3], node.tf["kernel"], node.tf["strides"], 1)
        node.tf["pad_begin"], node.tf["pad_end"] = begin, end
        return [[x[0], out[0], out[1], x[3]]]

    @staticmethod
    def lower(node, lw):
        lw.keep_inputs(node, node.data_inputs()[0])
        exclude = not node.tf.get("padded_zeros")
        lw.retype(node, Pooling, {
            "kernel": np.asarray(node.tf["kernel"], np.int64), "stride": np.asarray(node.tf["strides"], np.int64),
            "pad": node.tf["pad_begin"], "pad_end": node.tf["pad_end"], "rounding_type": "floor",
            "pool-method": "avg" if node.tf_op == "AvgPool" else "max", "exclude-pad": exclude})

