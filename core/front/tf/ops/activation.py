"""Activations: Relu, Relu6 (Clamp 0..6), LeakyRelu (ReLU with negative_slope),
Elu, Sigmoid, Tanh (Activation), and Softmax over the last TF axis (SoftMax on
the IR axis it maps to)."""
from __future__ import annotations

import numpy as np

from core.front.tf.ops.base import TFOp, expect_inputs
from core.front.tf.tensors import attr
from core.ops.activation import Activation, Clamp, ReLU
from core.ops.normalization import SoftMax


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


FUNCS = {
    "Relu": lambda n, x: np.maximum(x, 0), "Relu6": lambda n, x: np.clip(x, 0, 6),
    "LeakyRelu": lambda n, x: np.where(x > 0, x, x * n.tf["alpha"]),
    "Elu": lambda n, x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "Sigmoid": lambda n, x: _sigmoid(x), "Tanh": lambda n, x: np.tanh(x), "Softmax": lambda n, x: _softmax(x),
}


class Activations(TFOp):
    tf_types = tuple(FUNCS)

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)
        if node.tf_op == "LeakyRelu":
            node.tf["alpha"] = float(attr(node, "alpha", "f", 0.2))

    @staticmethod
    def evaluate(node, values):
        with np.errstate(over="ignore"):
            return [np.asarray(FUNCS[node.tf_op](node, values[0]), dtype=values[0].dtype)]

    @staticmethod
    def shape(node, shapes):
        return [shapes[0]]

    @staticmethod
    def lower(node, lw):
        op = node.tf_op
        x = node.data_inputs()[0]
        lw.keep_inputs(node, x)
        if op == "Relu":
            lw.retype(node, ReLU)
        elif op == "LeakyRelu":
            lw.retype(node, ReLU, {"negative_slope": node.tf["alpha"]})
        elif op == "Relu6":
            lw.retype(node, Clamp, {"min": 0.0, "max": 6.0})
        elif op == "Softmax":
            lw.retype(node, SoftMax, {"axis": lw.ir_axis(x, -1)})
        else:
            lw.retype(node, Activation, {"activation": {"Elu": "elu", "Sigmoid": "sigmoid", "Tanh": "tanh"}[op],
                                         "alpha": 1.0 if op == "Elu" else None})
