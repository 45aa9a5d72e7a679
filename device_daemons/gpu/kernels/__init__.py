"""Built-in GPU kernels, one layer family a module with its OpenCL file beside
it. Importing this package fills `GPU_KERNELS` ({IR layer type: class}); see
base.py for the interface."""
from . import (  # noqa: F401
    activation, const, convolution, detection, fully_connected, linear, normalization, pad, pooling, reduce,
    resize, roi_pooling, shape_ops, yolo,
)
from .base import GPU_KERNELS, GpuKernel, Launch, register

__all__ = ["GPU_KERNELS", "GpuKernel", "Launch", "register"]
