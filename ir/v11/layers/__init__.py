"""The mappers from IR v2 layer types to opset ops, one layer family a module.
Importing this package fills `MAPPERS` ({IR v2 type: mapper}); see base.py."""
from . import (  # noqa: F401
    activation, argmax, const, convolution, ctc, detection, fully_connected, linear, memory, normalization, pad,
    pooling, reduce, resize, roi_pooling, shape_ops, slicing, tf_subgraph, yolo,
)
from .base import MAPPERS, Mapping, Unmappable, maps

__all__ = ["MAPPERS", "Mapping", "Unmappable", "maps"]
