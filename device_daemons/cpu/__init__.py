"""The CPU device: IR networks run with numpy kernels (kernels/, one layer family a
module) by an ExecutionPlan compiled once per network (plan.py)."""
from .kernels import KERNELS, Kernel, KernelError, register
from .plan import ExecutionPlan, add_extension, load_custom_kernels, load_plan
from . import tf_backed  # noqa: F401,E402  (the TFCustomSubgraphCall kernel: TensorFlow through a TF worker)

__all__ = ["ExecutionPlan", "load_plan", "load_custom_kernels", "add_extension", "KERNELS", "Kernel",
           "KernelError", "register"]
