"""Operation definitions, one layer family a module. Importing this package
registers every built-in op (see core/ops/op.py)."""
from core.ops import (  # noqa: F401
    activation, argmax, convolution, ctc, detection, fully_connected, identity, linear, normalization,
    parameter, pooling, resize, roi_pooling, shape_ops,
)
