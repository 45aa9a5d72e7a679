"""Operation definitions, one layer family a module. Importing this package
registers every built-in op (see core/ops/op.py)."""
from core.ops import (  # noqa: F401
    activation, argmax, const, convolution, ctc, detection, fully_connected, identity, interpolate, linear,
    normalization, pad, parameter, pooling, reduce, resize, roi_pooling, shape_ops, slicing,
)
