"""ScaleShift (y = weights[c] * x + biases[c], channel axis 1) -> Multiply, Add;
Eltwise (sum with coefficients, mul, max) -> Multiply / Add / Maximum chains."""
from __future__ import annotations

import numpy as np

from .base import Mapping, maps, per_channel

_NUMPY = {"auto_broadcast": "numpy"}


@maps("ScaleShift")
def scale_shift(m: Mapping):
    x = m.inputs[0]
    rank = len(x.shape)
    channels = x.shape[1] if rank > 1 else x.shape[0]
    weights = m.attrs.blob("weights", required=False)
    biases = m.attrs.blob("biases", required=False)
    if weights is None and biases is None:
        raise m.attrs.error("has neither 'weights' nor 'biases' blobs")
    y = x
    if weights is not None:
        scale = m.const(per_channel(m, weights, rank, channels, "the 'weights' blob"), "weights")
        y = m.op("Multiply", [y, scale], x.shape, None if biases is None else "scale", attrs=_NUMPY)
    if biases is not None:
        shift = m.const(per_channel(m, biases, rank, channels, "the 'biases' blob"), "biases")
        y = m.op("Add", [y, shift], x.shape, attrs=_NUMPY)
    return [y]


_COMPARE = {"less": "Less", "less_equal": "LessEqual", "greater": "Greater", "greater_equal": "GreaterEqual",
            "equal": "Equal", "not_equal": "NotEqual"}


@maps("Eltwise")
def eltwise(m: Mapping):
    a = m.attrs
    operation, coeff = a["operation"], a["coeff"]
    xs = list(m.inputs)
    shape = m.out_dims()
    if coeff is not None:
        if operation != "sum":
            raise a.error("coefficients are only allowed for operation sum")
        if len(coeff) != len(xs):
            raise a.error(f"has {len(coeff)} coefficients for {len(xs)} inputs")
        last = len(xs) == 1
        xs = [x if c == 1.0 else m.op("Multiply", [x, m.const(np.float32(c), f"coeff{i}")], x.shape,
                                      None if last else f"scaled{i}", attrs=_NUMPY)
              for i, (x, c) in enumerate(zip(xs, coeff))]
    if len(xs) == 1:
        return [xs[0] if xs[0] is not m.inputs[0] else m.identity(xs[0])]
    if operation in _COMPARE:  # a boolean, as f32 1.0 / 0.0
        if len(xs) != 2:
            raise a.error(f"{operation} compares two inputs, not {len(xs)}")
        held = m.op(_COMPARE[operation], xs, shape, "held", element_type="boolean", attrs=_NUMPY)
        return [m.op("Convert", [held], shape, attrs={"destination_type": "f32"})]
    if operation == "floor_mod":
        return [m.op("FloorMod", xs, shape, attrs=_NUMPY)]
    if operation == "floor_div":  # (floor(a / b): OpenVINO has no FloorDiv)
        return [m.op("Floor", [m.op("Divide", xs, shape, "quotient", attrs=dict(_NUMPY, m_pythondiv=False))], shape)]
    type_ = {"sum": "Add", "mul": "Multiply", "max": "Maximum"}[operation]
    y = xs[0]
    for i, x in enumerate(xs[1:], start=1):
        y = m.op(type_, [y, x], shape, None if i == len(xs) - 1 else f"partial{i}", attrs=_NUMPY)
    return [y]


@maps("Select")
def select(m: Mapping):
    cond, a, b = m.inputs
    mask = m.op("NotEqual", [cond, m.const(np.float32(0), "zero")], cond.shape, "mask", element_type="boolean",
                attrs={"auto_broadcast": "numpy"})
    return [m.op("Select", [mask, a, b], a.shape, attrs={"auto_broadcast": "numpy"})]
