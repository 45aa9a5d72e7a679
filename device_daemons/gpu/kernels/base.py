"""The GPU kernel interface and the registry of built-in GPU kernels.

A GPU kernel computes one IR layer with OpenCL programs of its family's `.cl`
file (one layer family a file, beside the CPU kernels' families). Attributes,
blobs and output shapes come from the layer's CPU kernel (`self.ref`): the CPU
plugin is the reference for what a layer means, so both devices read an IR the
same way and the GPU plugin only adds the device code.

    @register("MyLayer")
    class MyLayer(GpuKernel):
        program = "my_family.cl"
        def configure(self, in_shapes, out_shapes): ...   # after every (re)shape: work sizes, device weights
        def launches(self, ins, outs): ...                # -> [Launch]; ins/outs are cl buffers

The plan calls `launches` once per infer request (each request has its own
command queue, buffers and kernel objects, whose arguments are set once), then
only enqueues. Class flags tell the plan how a layer may be scheduled:

* view: the output is the input's buffer (Reshape, Flatten): no launch at all;
* inplace: every work item reads the input values it needs before it writes
  the same positions of the output (element-wise layers, SoftMax, Normalize), so
  the output may be written into the first input's buffer when nobody reads that
  buffer afterwards;
* fuses_activation: an activation right after it (its only reader) runs in its
  epilogue (`self.act`, a common.cl ACT_* code and two parameters);
* host: computed by the CPU kernel on the host at run time (DetectionOutput:
  a data-dependent sort and NMS);
* constant: the output depends on the input shapes only (PriorBox): computed on
  the host once per shape and kept on the device.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from device_daemons.cpu.kernels import KERNELS as CPU_KERNELS
from device_daemons.cpu.kernels import KernelError
from device_daemons.cpu.kernels.base import registrar

# IR type -> GPU kernel class. Filled by the @register decorator of each family module.
GPU_KERNELS: dict[str, type] = {}

ACT_NONE, ACT_RELU, ACT_CLAMP, ACT_SIGMOID, ACT_TANH, ACT_ELU, ACT_ABS = range(7)
NO_ACTIVATION = (ACT_NONE, 0.0, 0.0)


register = registrar(GPU_KERNELS)


@dataclass
class Launch:
    """One kernel enqueue: program (a cl.Program), entry name, arguments (cl
    buffers and numpy scalars), global and local work sizes."""
    program: object
    name: str
    args: tuple
    global_size: tuple
    local_size: tuple | None = None


def i32(*values) -> list:
    return [np.int32(v) for v in values]


def f32(*values) -> list:
    return [np.float32(v) for v in values]


def round_up(value: int, multiple: int) -> int:
    return -(-int(value) // multiple) * multiple


def reference_kernel(layer):
    """The CPU kernel of `layer`: attributes, blobs and shapes (KernelError if the
    layer is malformed)."""
    cls = CPU_KERNELS.get(layer.type)
    if cls is None:
        raise KernelError(layer, f"has no reference (CPU) kernel for type {layer.type!r}")
    try:
        return cls(layer)
    except KernelError:
        raise
    except Exception as err:
        raise KernelError(layer, f"reading its attributes failed: {type(err).__name__}: {err}") from err


class GpuKernel:
    types: tuple = ()
    program: str | None = None
    view = False
    inplace = False
    fuses_activation = False
    host = False
    constant = False

    def __init__(self, layer, ctx):
        self.layer = layer
        self.ctx = ctx
        self.ref = reference_kernel(layer)
        self.act = NO_ACTIVATION

    def error(self, message: str) -> KernelError:
        return KernelError(self.layer, message)

    def shapes(self, in_shapes) -> list[tuple]:
        return [tuple(int(d) for d in s) for s in self.ref.getMemoryShapes([tuple(s) for s in in_shapes])]

    def configure(self, in_shapes, out_shapes):
        """After every (re)shape; in/out shapes are the current ones."""
        self.in_shapes = [tuple(s) for s in in_shapes]
        self.out_shapes = [tuple(s) for s in out_shapes]

    def launches(self, ins, outs) -> list[Launch]:
        raise NotImplementedError

    # helpers -----------------------------------------------------------------------
    def prog(self):
        return self.ctx.program(self.program)

    def launch(self, name, args, global_size, local_size=None) -> Launch:
        return Launch(self.prog(), name, tuple(args), tuple(int(g) for g in global_size),
                      None if local_size is None else tuple(local_size))

    def act_args(self) -> list:
        code, a, b = self.act
        return [np.int32(code), np.float32(a), np.float32(b)]


def channel_layout(shape) -> tuple[int, int, int]:
    """(outer, channels, inner) of a tensor with the channel axis 1 (rank 1: the
    only axis is the channel axis, as the CPU kernels read it)."""
    if len(shape) == 1:
        return 1, int(shape[0]), 1
    inner = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return int(shape[0]), int(shape[1]), inner
