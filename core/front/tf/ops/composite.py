"""TensorFlow's element-wise ops that are several IR layers: Atan2 (atan(y / x) turned by pi towards y's side
where x is negative, signed zeros as C's atan2 has them), DivNoNan (x / y, 0 where y is 0), Xdivy (x / y, 0 where
x is 0), MulNoNan (x y, 0 where y is 0), Xlogy (x log(y), 0 where x is 0), ClipByValue of tensor bounds and
AdjustContrastv2 (the channel means over H and W and one Eltwise sum), each a small graph of Eltwise, Power, Activation,
Select (and Reduce) layers over the output's shape, the node itself its last layer."""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.lowering import Composer, broadcast_to
from core.front.tf.ops.base import TFOp, broadcast_shapes, expect_inputs
from core.front.tf.tensors import describe
from core.ops.activation import Activation, Clamp
from core.ops.linear import Eltwise, Select
from core.ops.reduce import ReduceMean


def _atan2(y, x):
    return np.arctan2(y, x)


def _div_no_nan(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y == 0, np.zeros_like(x), x / np.where(y == 0, 1, y))


def _xlogy(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, np.zeros_like(x), x * np.log(y))


def _xdivy(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, np.zeros_like(x), x / y)


def _mul_no_nan(x, y):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(y == 0, np.zeros_like(x), x * y)


FUNCTIONS = {"Atan2": _atan2, "DivNoNan": _div_no_nan, "Xlogy": _xlogy, "Xdivy": _xdivy, "MulNoNan": _mul_no_nan}


class Composite(TFOp):
    tf_types = tuple(FUNCTIONS)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def evaluate(node, values):
        a, b = values
        return [np.asarray(FUNCTIONS[node.tf_op](a, b)).astype(np.result_type(a, b), copy=False)]

    @staticmethod
    def shape(node, shapes):
        return [broadcast_shapes(node, *shapes)]

    @staticmethod
    def lower(node, lw):
        c = Composer(node, lw)
        first, second = (c.full(d, tag) for d, tag in zip(node.data_inputs(), ("a", "b")))
        zero = c.const(0.0, "zero")
        if node.tf_op != "Atan2":  # a product, 0 where x (Xdivy, Xlogy) or y (DivNoNan, MulNoNan) is 0
            if node.tf_op in ("DivNoNan", "Xdivy"):
                factor = c.power("reciprocal", second, power=-1.0)
            elif node.tf_op == "Xlogy":
                factor = c.op("log", Activation, {"activation": "log"}, second)
            else:
                factor = second
            zeros_of = first if node.tf_op in ("Xdivy", "Xlogy") else second
            product = c.eltwise("product", "mul", first, factor)
            return c.finish(Select, {}, c.eltwise("is_0", "equal", zeros_of, zero), zero, product)
        y, x = first, second
        # the signs of y and x, signed zeros too (1 / -0 is -inf): C's atan2, which TensorFlow's is
        x_inverse = c.power("x_inverse", x, power=-1.0)
        y_sign = c.eltwise("y_sign", "less", c.power("y_inverse", y, power=-1.0), zero)
        x_sign = c.eltwise("x_sign", "less", x_inverse, zero)
        # atan(y / x), turned by pi towards y's side where x is negative (-0 too)
        turned = c.eltwise("turned", "mul", x_sign, c.power("turn", y_sign, scale=-2.0 * np.pi, shift=np.pi))
        ratio = c.eltwise("ratio", "mul", y, x_inverse)
        angle = c.eltwise("angle", "sum", c.op("atan", Activation, {"activation": "atan"}, ratio), turned)
        # y = 0 (atan(0 / 0) is NaN): 0, or +-pi where x is negative
        c.finish(Select, {}, c.eltwise("y_is_0", "equal", y, zero), turned, angle)


class ClipByValue(TFOp):
    """tf.raw_ops.ClipByValue (TF1 graphs; tf.clip_by_value writes Minimum and Maximum): one bound each a Clamp, else
    max(t, low) where it is not above `high`, `high` where it is."""
    tf_types = ("ClipByValue",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 3)

    @staticmethod
    def evaluate(node, values):
        t, low, high = values
        return [np.minimum(np.maximum(t, low), high).astype(t.dtype, copy=False)]

    @staticmethod
    def shape(node, shapes):
        return [broadcast_shapes(node, *shapes)]

    @staticmethod
    def lower(node, lw):
        t, low, high = node.data_inputs()
        bounds = [d.soft_get("value") for d in (low, high)]
        if all(b is not None and np.size(b) == 1 for b in bounds) and \
                np.array_equal(lw.tf_shape(t), lw.tf_shape(node.out_node(0))):
            lw.keep_inputs(node, t)
            return lw.retype(node, Clamp, {"min": float(np.ravel(bounds[0])[0]), "max": float(np.ravel(bounds[1])[0])})
        c = Composer(node, lw)
        t, low, high = (c.full(d, tag) for d, tag in ((t, "t"), (low, "low"), (high, "high")))
        c.finish(Select, {}, c.eltwise("above", "greater", t, high), high, c.eltwise("raised", "max", t, low))


class AdjustContrast(TFOp):
    """tf.image.adjust_contrast (AdjustContrastv2, the factor a constant): each image's channel mean over H and W
    (a ReduceMean, kept as 1 x 1) brought back to the image's size, then x * factor + mean * (1 - factor) - one
    Eltwise sum with those coefficients."""
    tf_types = ("AdjustContrastv2",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def evaluate(node, values):
        images, factor = values
        mean = images.mean(axis=(-3, -2), keepdims=True, dtype=np.float32)
        return [((images - mean) * np.float32(factor) + mean).astype(images.dtype)]

    @staticmethod
    def shape(node, shapes):
        if len(shapes[0]) < 3:
            raise ShapeError("{}: images {} need height, width and channels.", describe(node), list(shapes[0]))
        return [shapes[0]]

    @staticmethod
    def lower(node, lw):
        images, factor = node.data_inputs()
        if factor.soft_get("value") is None:
            raise lw.unsupported(node, "a contrast factor computed from the model's data")
        shape = [int(d) for d in lw.tf_shape(images)]
        if len(shape) != 4:
            raise lw.unsupported(node, "images of rank {} (one batch of NHWC images is converted)".format(len(shape)))
        f = float(np.ravel(factor.value)[0])
        pooled = shape[:1] + [1, 1] + shape[3:]
        reduce = lw.new_op(node.name + "/mean", ReduceMean, {"axes": [2, 3], "keep_dims": True})
        lw.graph.connect(images, reduce, inp=0)
        mean = broadcast_to(lw, lw.tensor_of(reduce, node.name + "/mean", pooled, True), shape, node.name + "/mean")
        lw.keep_inputs(node, images, mean)
        lw.retype(node, Eltwise, {"operation": "sum", "coeff": [f, 1.0 - f]})
