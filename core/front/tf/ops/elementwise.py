"""Element-wise arithmetic: Add/AddV2/BiasAdd/Sub/Mul/RealDiv/Maximum/Minimum/
SquaredDifference/Pow, Square/Sqrt/Rsqrt/Neg/Reciprocal, the unary functions that are
an IR Activation type (Abs, Exp, Log, Floor, Ceil, Round/Rint, Sign, Sin ... Atanh,
Log1p, Expm1, Softsign), IsNan / IsInf / IsFinite, FloorDiv / FloorMod (Eltwise floor_div / floor_mod), and the
conversion-time only ones (TruncateDiv, TruncateMod, Mod, Div: shape arithmetic).

With a constant operand that is one value or one value per channel (the last TF
axis of a 2-D or 4-D tensor: axis 1 in the IR) the op becomes the internal Mul /
Add that linear fusing folds into the convolution before it (else ScaleShift);
a scalar Maximum/Minimum is a Clamp, a scalar power a Power. Other constants
become Const layers. Between two tensors: Eltwise (sum with coefficients 1,-1
for Sub; a Power(-1) first for RealDiv; negations around max for Minimum), each
operand broadcast to the output shape by Reshape + Tile.
"""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.lowering import TO_NCHW, Composer, Lowering, broadcast_to
from core.front.tf.ops.base import SameShapeOp, TFOp, broadcast_shapes, expect_inputs
from core.front.tf.tensors import attr, describe
from core.ops.activation import Activation, Clamp, Power
from core.ops.linear import Add, Eltwise, Mul, Select as SelectLayer

FLT_MAX = float(np.finfo(np.float32).max)


def _truncate_div(a, b):
    """Division toward zero (TensorFlow's TruncateDiv, and its Div of integers: C's; -7 / 2 = -3), exact for
    integers."""
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))
    return np.trunc(a / b)


def _floor_div(a, b):
    return np.floor_divide(a, b) if a.dtype.kind in "iu" and b.dtype.kind in "iu" else np.floor(a / b)


BINARY = {
    "Add": np.add, "AddV2": np.add, "BiasAdd": np.add, "BiasAddV1": np.add, "Sub": np.subtract, "Mul": np.multiply,
    "RealDiv": np.divide, "Div": lambda a, b: _truncate_div(a, b) if a.dtype.kind in "iu" else np.divide(a, b),
    "Maximum": np.maximum, "Minimum": np.minimum, "SquaredDifference": lambda a, b: np.square(a - b),
    "Pow": np.power, "FloorDiv": _floor_div, "FloorMod": np.mod, "TruncateDiv": _truncate_div,
    "TruncateMod": np.fmod, "Mod": np.fmod,
    "Equal": np.equal, "NotEqual": np.not_equal, "Less": np.less, "LessEqual": np.less_equal,
    "Greater": np.greater, "GreaterEqual": np.greater_equal, "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
}
CONVERSION_ONLY = {"TruncateDiv", "TruncateMod", "Mod", "Div"}
FLOORED = {"FloorDiv": "floor_div", "FloorMod": "floor_mod"}  # on the model's data: Eltwise operations
# comparisons on the model's data: an Eltwise comparison (1.0 where it holds, as the bool TensorFlow makes is
# read: tf.where's condition, a Cast to float); with the constant first, the mirrored comparison
COMPARISONS = {"Less": "less", "LessEqual": "less_equal", "Greater": "greater", "GreaterEqual": "greater_equal",
               "Equal": "equal", "NotEqual": "not_equal"}
MIRRORED = {"less": "greater", "less_equal": "greater_equal", "greater": "less", "greater_equal": "less_equal",
            "equal": "equal", "not_equal": "not_equal"}
# and / or of such 1.0 / 0.0 tensors: their product / maximum (LogicalNot: 1 - x, a Power)
LOGICAL = {"LogicalAnd": "mul", "LogicalOr": "max"}


def _same_dtype(a, b, result):
    result = np.asarray(result)
    if a.dtype == b.dtype and result.dtype != a.dtype and result.dtype.kind == a.dtype.kind:
        return result.astype(a.dtype)
    return result


class Binary(TFOp):
    tf_types = tuple(BINARY)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)
        if node.tf_op == "BiasAdd":
            fmt = attr(node, "data_format", "s", "NHWC")
            if fmt != "NHWC":
                raise node_error(node, "data_format {} is not supported; frozen graphs for CPU are NHWC".format(fmt))

    @staticmethod
    def evaluate(node, values):
        a, b = values
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return [_same_dtype(a, b, BINARY[node.tf_op](a, b))]

    @staticmethod
    def shape(node, shapes):
        return [broadcast_shapes(node, *shapes)]

    @staticmethod
    def lower(node, lw):
        op = node.tf_op
        if op in CONVERSION_ONLY:
            raise lw.unsupported(node, "{} is only computed at conversion time (shape arithmetic), but here it "
                                       "works on the model's data".format(op))
        a, b = node.data_inputs()
        va, vb = a.soft_get("value"), b.soft_get("value")
        if op in FLOORED:  # (an index's row and column in a flattened map: integers held as floats, exact)
            c = Composer(node, lw)
            return c.finish(Eltwise, {"operation": FLOORED[op]}, c.full(a, "a"), c.full(b, "b"))
        if op in COMPARISONS:
            return _compare(node, lw, COMPARISONS[op], a, b, va, vb)
        if op in LOGICAL:
            return _compare(node, lw, LOGICAL[op], a, b, va, vb)
        if va is None and vb is None:
            _tensor_tensor(node, lw, op, a, b)
        elif vb is not None:
            _tensor_const(node, lw, op, a, np.asarray(vb, dtype=np.float32), const_first=False)
        else:
            _tensor_const(node, lw, op, b, np.asarray(va, dtype=np.float32), const_first=True)


def node_error(node, why):
    from core.errors import Error
    from core.front.tf.tensors import describe
    return Error("{}: {}.", describe(node), why)


# --- tensor (op) constant --------------------------------------------------------------
def channel_vector(lw: Lowering, x, value: np.ndarray):
    """The constant as one value or one value per channel of x, or None when it is neither
    (or x has a rank whose channel is not IR axis 1)."""
    if value.size == 1:
        return value.reshape(1)
    shape = lw.tf_shape(x)
    rank = len(shape)
    if rank not in (1, 2, 4) or value.ndim > rank:
        return None
    aligned = (1,) * (rank - value.ndim) + value.shape
    if any(d != 1 for d in aligned[:-1]) or aligned[-1] != shape[-1]:
        return None
    return value.reshape(-1)


def linear(node, lw: Lowering, x, w=None, b=None):
    """node := x * w + b with w, b per channel (internal Mul -> Add, fused later)."""
    lw.keep_inputs(node, x)
    if w is not None and b is not None:
        lw.retype(node, Add, {})
        lw.add_blob(node, "biases", b)
        mul = lw.insert_before(node, 0, node.name + "/mul", Mul, {})
        lw.add_blob(mul, "weights", w)
    elif w is not None:
        lw.retype(node, Mul, {})
        lw.add_blob(node, "weights", w)
    else:
        lw.retype(node, Add, {})
        lw.add_blob(node, "biases", b)


def eltwise_with_const(node, lw, x, value, operation, coeff=None):
    """Eltwise between x and a constant broadcast to the output shape (a Const layer)."""
    c = Composer(node, lw)
    attrs = {"operation": operation}
    if coeff:
        attrs["coeff"] = coeff
    c.finish(Eltwise, attrs, c.full(x, "x"), c.const(value, "const"))


def nonzero(node, lw, x):
    """`node` becomes x != 0, 1.0 where it holds (a cast of the model's data to bool)."""
    eltwise_with_const(node, lw, x, np.float32(0.0), "not_equal")


def _tensor_const(node, lw, op, x, c, const_first):
    vec = channel_vector(lw, x, c)
    broadcasts = not np.array_equal(lw.tf_shape(node.out_node(0)), lw.tf_shape(x))
    if broadcasts:  # the constant is bigger than the tensor: the general path
        vec = None
    if op in ("Add", "AddV2", "BiasAdd", "BiasAddV1"):
        if vec is not None:
            return linear(node, lw, x, b=vec)
        return eltwise_with_const(node, lw, x, c, "sum")
    if op == "Sub":
        if vec is not None:
            return linear(node, lw, x, w=-np.ones_like(vec), b=vec) if const_first else linear(node, lw, x, b=-vec)
        return eltwise_with_const(node, lw, x, c, "sum", [-1.0, 1.0] if const_first else [1.0, -1.0])
    if op == "Mul":
        if vec is not None:
            return linear(node, lw, x, w=vec)
        return eltwise_with_const(node, lw, x, c, "mul")
    if op == "RealDiv":
        if const_first:  # c / x = c * x^-1
            _power_before(node, lw, x, power=-1.0)
            x = node.in_node(0)
            if vec is not None:
                return linear(node, lw, x, w=vec)
            return eltwise_with_const(node, lw, x, c, "mul")
        with np.errstate(divide="ignore"):
            inv = (1.0 / c).astype(np.float32)
        if vec is not None:
            return linear(node, lw, x, w=(1.0 / vec).astype(np.float32))
        return eltwise_with_const(node, lw, x, inv, "mul")
    if op in ("Maximum", "Minimum"):
        if c.size == 1 and not broadcasts:
            lo, hi = (float(c.ravel()[0]), FLT_MAX) if op == "Maximum" else (-FLT_MAX, float(c.ravel()[0]))
            lw.keep_inputs(node, x)
            return lw.retype(node, Clamp, {"min": lo, "max": hi})
        if op == "Maximum":
            return eltwise_with_const(node, lw, x, c, "max")
        # min(x, c) = -max(-x, -c)
        _power_before(node, lw, x, scale=-1.0)
        eltwise_with_const(node, lw, node.in_node(0), -c, "max")
        return _negate_after(node, lw)
    if op == "SquaredDifference":
        if vec is not None:
            linear(node, lw, x, b=-vec)
        else:
            eltwise_with_const(node, lw, x, c, "sum", [-1.0, 1.0] if const_first else [1.0, -1.0])
        return lw.insert_after(node, node.name + "/square", Power, {"power": 2.0})
    if op == "Pow" and not const_first and c.size == 1 and not broadcasts:
        lw.keep_inputs(node, x)
        return lw.retype(node, Power, {"power": float(c.ravel()[0])})
    raise lw.unsupported(node, "{} with a constant {} operand of shape {} on the model's data".format(
        op, "first" if const_first else "second", list(c.shape)))


def _power_before(node, lw, x, power=1.0, scale=1.0):
    lw.keep_inputs(node, x)
    lw.insert_before(node, 0, node.name + "/power", Power, {"power": power, "scale": scale})


def _negate_after(node, lw):
    return lw.insert_after(node, node.name + "/neg", Power, {"scale": -1.0})


def _compare(node, lw, operation, a, b, va, vb):
    """A comparison, an and / or (symmetric: MIRRORED leaves them as they are) as one Eltwise."""
    if va is None and vb is None:
        c = Composer(node, lw)
        return c.finish(Eltwise, {"operation": operation}, c.full(a, "a"), c.full(b, "b"))
    if vb is not None:
        return eltwise_with_const(node, lw, a, np.asarray(vb, dtype=np.float32), operation)
    return eltwise_with_const(node, lw, b, np.asarray(va, dtype=np.float32), MIRRORED.get(operation, operation))


# --- tensor (op) tensor ---------------------------------------------------------------
def _tensor_tensor(node, lw, op, a, b):
    c = Composer(node, lw)
    lw.keep_inputs(node, c.full(a, "a"), c.full(b, "b"))
    if op in ("Add", "AddV2", "BiasAdd", "BiasAddV1"):
        return lw.retype(node, Eltwise, {"operation": "sum"})
    if op in ("Sub", "SquaredDifference"):
        lw.retype(node, Eltwise, {"operation": "sum", "coeff": [1.0, -1.0]})
        if op == "SquaredDifference":
            lw.insert_after(node, node.name + "/square", Power, {"power": 2.0})
        return None
    if op == "Mul":
        return lw.retype(node, Eltwise, {"operation": "mul"})
    if op == "RealDiv":  # a * b^-1
        lw.retype(node, Eltwise, {"operation": "mul"})
        return lw.insert_before(node, 1, node.name + "/reciprocal", Power, {"power": -1.0})
    if op == "Maximum":
        return lw.retype(node, Eltwise, {"operation": "max"})
    if op == "Minimum":  # -max(-a, -b)
        lw.retype(node, Eltwise, {"operation": "max"})
        lw.insert_before(node, 0, node.name + "/neg_a", Power, {"scale": -1.0})
        lw.insert_before(node, 1, node.name + "/neg_b", Power, {"scale": -1.0})
        return _negate_after(node, lw)
    raise lw.unsupported(node, "{} between two tensors computed from the model's data".format(op))


class AddN(TFOp):
    """The sum of N tensors of one shape: Eltwise sum."""
    tf_types = ("AddN",)

    @staticmethod
    def extract(node):
        expect_inputs(node, (1, 1 << 20))

    @staticmethod
    def evaluate(node, values):
        return [sum(values[1:], values[0])]

    @staticmethod
    def shape(node, shapes):
        return [broadcast_shapes(node, *shapes)]

    @staticmethod
    def lower(node, lw):
        inputs = node.data_inputs()
        lw.keep_inputs(node, *inputs)
        if len(inputs) == 1:
            from core.ops.identity import Identity
            return lw.retype(node, Identity)
        lw.retype(node, Eltwise, {"operation": "sum"})


# --- unary ---------------------------------------------------------------------------
UNARY = {
    "Square": (np.square, {"power": 2.0}), "Sqrt": (np.sqrt, {"power": 0.5}),
    "Rsqrt": (lambda x: 1.0 / np.sqrt(x), {"power": -0.5}), "Neg": (np.negative, {"scale": -1.0}),
    "Reciprocal": (np.reciprocal, {"power": -1.0}), "Inv": (np.reciprocal, {"power": -1.0}),
    "Abs": (np.abs, None), "Exp": (np.exp, None), "Log": (np.log, None), "Floor": (np.floor, None),
    "Ceil": (np.ceil, None), "Round": (np.round, None), "Rint": (np.rint, None), "Sign": (np.sign, None),
    "Sin": (np.sin, None), "Cos": (np.cos, None), "Tan": (np.tan, None), "Asin": (np.arcsin, None),
    "Acos": (np.arccos, None), "Atan": (np.arctan, None), "Sinh": (np.sinh, None), "Cosh": (np.cosh, None),
    "Asinh": (np.arcsinh, None), "Acosh": (np.arccosh, None), "Atanh": (np.arctanh, None), "Log1p": (np.log1p, None),
    "Expm1": (np.expm1, None), "Softsign": (lambda x: x / (1 + np.abs(x)), None),
    "LogicalNot": (np.logical_not, {"scale": -1.0, "shift": 1.0}),  # 1 - x of a 1.0 / 0.0 tensor
}


# unary ops that are an IR Activation type (round: halves to even, as both TensorFlow ops; the rest by their names)
ACTIVATIONS = {"Abs": "abs", "Exp": "exp", "Log": "log", "Floor": "floor", "Ceil": "ceil", "Round": "round",
               "Rint": "round", **{op: op.lower() for op in (
                   "Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
                   "Log1p", "Expm1", "Softsign")}}


class Unary(SameShapeOp):
    tf_types = tuple(UNARY)

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)

    @staticmethod
    def evaluate(node, values):
        x = values[0]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            y = np.asarray(UNARY[node.tf_op][0](x))
        return [y.astype(x.dtype) if x.dtype.kind == "f" else y]

    @staticmethod
    def lower(node, lw):
        op = node.tf_op
        lw.keep_inputs(node, node.data_inputs()[0])
        if op in ACTIVATIONS:
            return lw.retype(node, Activation, {"activation": ACTIVATIONS[op]})
        power = UNARY[op][1]
        if power is None:
            raise lw.unsupported(node, "{} has no IR layer; on the model's data it cannot be converted".format(op))
        return lw.retype(node, Power, dict(power))


__all__ = ["Binary", "Unary", "linear", "channel_vector", "nonzero", "TO_NCHW"]


class Select(TFOp):
    """tf.where(condition, a, b) (Select, SelectV2: numpy's broadcasting; TF1's Select picks rows by a vector):
    the three brought to the output's shape (broadcast_to), then a Select layer. A causal attention mask's."""
    tf_types = ("Select", "SelectV2")

    @staticmethod
    def extract(node):
        expect_inputs(node, 3)

    @staticmethod
    def _condition(node, cond, a):
        if node.tf_op == "Select" and len(cond) == 1 and len(a) > 1:  # (TF1: a vector picks rows)
            return tuple(cond) + (1,) * (len(a) - 1)
        return tuple(cond)

    @classmethod
    def evaluate(cls, node, values):
        cond, a, b = values
        return [np.where(cond.astype(bool).reshape(cls._condition(node, cond.shape, a.shape)), a, b)]

    @classmethod
    def shape(cls, node, shapes):
        cond, a, b = shapes
        try:
            return [np.broadcast_shapes(cls._condition(node, cond, a), tuple(a), tuple(b))]
        except ValueError:
            raise ShapeError("{}: the shapes {}, {} and {} do not broadcast.", describe(node), list(cond), list(a),
                             list(b)) from None

    @staticmethod
    def lower(node, lw):
        out_shape = lw.tf_shape(node.out_node(0))
        inputs = node.data_inputs()
        if node.tf_op == "Select" and len(lw.tf_shape(inputs[0])) == 1 < len(out_shape):
            raise lw.unsupported(node, "TF1's Select of rows by a vector")
        parts = [data if np.array_equal(lw.tf_shape(data), out_shape) else
                 broadcast_to(lw, data, out_shape, "{}/{}".format(node.name, tag))
                 for tag, data in zip(("cond", "a", "b"), inputs)]
        lw.keep_inputs(node, *parts)
        lw.retype(node, SelectLayer)


# --- float classes --------------------------------------------------------------------
FLOAT_CLASSES = {"IsNan": np.isnan, "IsInf": np.isinf, "IsFinite": np.isfinite}


class FloatClass(SameShapeOp):
    """IsNan (x != x), IsInf (|x| == inf), IsFinite (|x| < inf: not for NaN) as Eltwise comparisons, 1.0 where
    they hold (the bool TensorFlow makes, read as tf.where's condition or cast to float)."""
    tf_types = tuple(FLOAT_CLASSES)

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)

    @staticmethod
    def evaluate(node, values):
        return [FLOAT_CLASSES[node.tf_op](values[0])]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        if node.tf_op == "IsNan":  # (the one value not equal to itself)
            lw.keep_inputs(node, x, x)
            return lw.retype(node, Eltwise, {"operation": "not_equal"})
        lw.keep_inputs(node, x)
        lw.insert_before(node, 0, node.name + "/abs", Activation, {"activation": "abs"})
        eltwise_with_const(node, lw, node.in_node(0), np.float32(np.inf),
                            "equal" if node.tf_op == "IsInf" else "less")
