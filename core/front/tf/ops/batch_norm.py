"""FusedBatchNorm (V1, V2, V3) at inference: y = (x - mean) / sqrt(var + eps) * scale + offset
per channel, i.e. x * w + b -> the internal Mul -> Add that linear fusing folds into
the convolution before it (else a ScaleShift). Outputs 1-5 (batch statistics)
are for training only. (Keras 3 writes batch norm as Rsqrt/Mul/Sub/AddV2 on its
constants instead: those fold to the same Mul -> Add, core/front/tf/ops/elementwise.py.)"""
from __future__ import annotations

import numpy as np

from core.errors import Error, ShapeError
from core.front.tf.ops.base import TFOp, expect_inputs
from core.front.tf.ops.elementwise import linear
from core.front.tf.tensors import attr, describe


class FusedBatchNorm(TFOp):
    tf_types = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")

    @staticmethod
    def extract(node):
        expect_inputs(node, 5)
        node.tf["epsilon"] = float(attr(node, "epsilon", "f", 1e-4))
        if attr(node, "data_format", "s", "NHWC") != "NHWC":
            raise Error("{}: only NHWC batch normalization is supported.", describe(node))
        if attr(node, "is_training", "b", True):
            raise Error("{}: is_training is set: the graph normalizes with the statistics of each batch (a "
                        "training graph). Freeze the model for inference (Keras: training=False).", describe(node))

    @staticmethod
    def _factors(node, values):
        scale, offset, mean, var = (np.asarray(v, np.float64).ravel() for v in values[1:5])
        w = scale / np.sqrt(var + node.tf["epsilon"])
        return w.astype(np.float32), (offset - mean * w).astype(np.float32)

    @staticmethod
    def evaluate(node, values):
        w, b = FusedBatchNorm._factors(node, values)
        c = values[1].shape
        return [values[0] * w + b, np.zeros(c, np.float32), np.zeros(c, np.float32), np.zeros(c, np.float32),
                np.zeros(c, np.float32), np.zeros(0, np.float32)]

    @staticmethod
    def shape(node, shapes):
        x = shapes[0]
        if any(len(s) != 1 or s[0] != x[-1] for s in shapes[1:]):
            raise ShapeError("{}: scale, offset, mean and variance must have {} values (the channels of {}).",
                             describe(node), x[-1], list(x))
        c = [x[-1]]
        return [x, c, c, c, c, [0]]

    @staticmethod
    def lower(node, lw):
        ins = node.data_inputs()
        if any(d.soft_get("value") is None for d in ins[1:]):
            raise lw.unsupported(node, "its scale, offset, mean or variance is computed from the model's data")
        w, b = FusedBatchNorm._factors(node, [d.value for d in ins])
        for port, out in node.out_nodes().items():
            if port > 0:
                if out.consumers() or out.soft_get("is_output"):
                    raise lw.unsupported(node, "its batch statistics (output {}) are used".format(port))
                lw.graph.remove_node(out.id)
        linear(node, lw, ins[0], w=w, b=b)
