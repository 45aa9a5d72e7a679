"""Activations: Relu, Relu6 (Clamp 0..6), LeakyRelu (ReLU with negative_slope),
Elu, Sigmoid, Tanh, Erf, Softplus (Activation; Erfc as 1 - erf, Selu as scale * elu: Activation then Power), Softmax
and LogSoftmax over the last TF axis (SoftMax / LogSoftmax on the IR axis it maps to), and the GELU that
patterns.py finds (Activation gelu)."""
from __future__ import annotations

import numpy as np

from core.front.tf.ops.base import SameShapeOp, expect_inputs
from core.front.tf.tensors import attr
from core.ops.activation import Activation, Clamp, Power, ReLU
from core.ops.normalization import LogSoftmax, SoftMax
from ir.special import erf, gelu


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805  # (TensorFlow's, as Keras' selu)


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


FUNCS = {
    "Relu": lambda n, x: np.maximum(x, 0), "Relu6": lambda n, x: np.clip(x, 0, 6),
    "LeakyRelu": lambda n, x: np.where(x > 0, x, x * n.tf["alpha"]),
    "Elu": lambda n, x: _elu(x), "Selu": lambda n, x: SELU_SCALE * _elu(x, SELU_ALPHA),
    "Sigmoid": lambda n, x: _sigmoid(x), "Tanh": lambda n, x: np.tanh(x), "Softmax": lambda n, x: _softmax(x),
    "LogSoftmax": lambda n, x: _log_softmax(x),
    "Erf": lambda n, x: erf(x), "Erfc": lambda n, x: 1.0 - erf(x), "Softplus": lambda n, x: np.logaddexp(0.0, x),
}
ACTIVATION_TYPES = {"Elu": "elu", "Selu": "elu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Erfc": "erf",
                    "Softplus": "softplus"}
ALPHAS = {"Elu": 1.0, "Selu": SELU_ALPHA}


class Activations(SameShapeOp):
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
        elif op == "LogSoftmax":
            lw.retype(node, LogSoftmax, {"axis": lw.ir_axis(x, -1)})
        else:
            lw.retype(node, Activation, {"activation": ACTIVATION_TYPES[op], "alpha": ALPHAS.get(op)})
            if op == "Erfc":
                lw.insert_after(node, node.name + "/erf", Power, {"power": 1.0, "scale": -1.0, "shift": 1.0})
            elif op == "Selu":
                lw.insert_after(node, node.name + "/elu", Power, {"power": 1.0, "scale": SELU_SCALE, "shift": 0.0})


class Gelu(SameShapeOp):
    """x * Phi(x), a sub-graph of TensorFlow ops that patterns.py matched (no TF op of
    this name); node.tf["approximation"]: "erf" or "tanh"."""

    @staticmethod
    def evaluate(node, values):
        return [np.asarray(gelu(values[0], node.tf["approximation"]), dtype=values[0].dtype)]

    @staticmethod
    def lower(node, lw):
        lw.keep_inputs(node, node.data_inputs()[0])
        lw.retype(node, Activation, {"activation": "gelu", "approximation_mode": node.tf["approximation"]})
