"""Built-in CPU kernels, one layer family a module. Importing this package fills
`KERNELS` ({IR layer type: kernel class}); see base.py for the interface."""
from . import (  # noqa: F401
    activation, argmax, batch_norm, convolution, ctc, detection, fully_connected, linear, memory, normalization,
    pooling, resize, roi_pooling, shape_ops, yolo,
)
from .base import KERNELS, Kernel, KernelError, register

__all__ = ["KERNELS", "Kernel", "KernelError", "register"]
