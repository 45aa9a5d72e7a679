"""Built-in CPU kernels, one layer family a module. Importing this package fills
`KERNELS` ({IR layer type: kernel class}); see base.py for the interface."""
from . import (  # noqa: F401
    activation, argmax, const, convolution, ctc, detection, fully_connected, interpolate, linear,
    memory, normalization, pad, pooling, reduce, resize, roi_pooling, shape_ops, slicing, yolo,
)
from .base import KERNELS, Kernel, KernelError, register

__all__ = ["KERNELS", "Kernel", "KernelError", "register"]
