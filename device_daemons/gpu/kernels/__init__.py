"""Built-in GPU kernels, one layer family a module with its OpenCL file beside
it. Importing this package fills `GPU_KERNELS` ({IR layer type: class}); see
base.py for the interface."""
from . import activation, convolution, detection, fully_connected, linear, normalization, pooling, shape_ops  # noqa: F401
from .base import GPU_KERNELS, GpuKernel, Launch, register

__all__ = ["GPU_KERNELS", "GpuKernel", "Launch", "register"]
