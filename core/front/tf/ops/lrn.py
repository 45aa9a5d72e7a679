"""LRN (tf.nn.local_response_normalization) over the channels of an NHWC tensor: the IR's Norm across channels
(Caffe's LRN). TensorFlow sums the squares of depth_radius channels on each side and multiplies the sum by alpha;
Caffe's window is local_size = 2 * depth_radius + 1 and its alpha is divided by it."""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.ops.base import TFOp, expect_inputs
from core.front.tf.tensors import attr, describe
from core.ops.normalization import Norm


class LRN(TFOp):
    tf_types = ("LRN",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)
        node.tf.update(radius=int(attr(node, "depth_radius", "i", 5)), bias=float(attr(node, "bias", "f", 1.0)),
                       alpha=float(attr(node, "alpha", "f", 1.0)), beta=float(attr(node, "beta", "f", 0.5)))

    @staticmethod
    def evaluate(node, values):
        x, r = values[0].astype(np.float64), node.tf["radius"]
        squares = np.pad(x * x, [(0, 0)] * (x.ndim - 1) + [(r, r)])
        window = sum(squares[..., i:i + x.shape[-1]] for i in range(2 * r + 1))
        return [(x / (node.tf["bias"] + node.tf["alpha"] * window) ** node.tf["beta"]).astype(values[0].dtype)]

    @staticmethod
    def shape(node, shapes):
        if len(shapes[0]) != 4:
            raise ShapeError("{}: LRN takes a 4-D (NHWC) input, got {}.", describe(node), list(shapes[0]))
        return [shapes[0]]

    @staticmethod
    def lower(node, lw):
        size = 2 * node.tf["radius"] + 1
        lw.keep_inputs(node, node.data_inputs()[0])
        lw.retype(node, Norm, {"alpha": node.tf["alpha"] * size, "beta": node.tf["beta"], "local-size": size,
                               "region": "across", "k": node.tf["bias"]})
