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
  the host once per shape and kept on the device;
* tunable (Tunable): variants (configurations) the plan's tuner picks per shape;
* residual_ok: an Eltwise sum whose other input is ready may run in its
  epilogue (`self.residual`: the launches get that input after the others);
* places_output: may write into its slice of a Concat's buffer (`self.place`:
  element offset and stride between images, set by the plan after each reshape).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from device_daemons.cpu.kernels import KERNELS as CPU_KERNELS
from device_daemons.cpu.kernels import KernelError
from device_daemons.cpu.kernels.base import registrar

from .tiles import mma_defines, mma_threads, mma_valid, tile_defines, tile_threads, tile_valid

MMA_KINDS = ("mma", "wino_mma")  # configurations whose GEMM runs on tensor cores (tiled.cl's conv_mma)

# IR type -> GPU kernel class. Filled by the @register decorator of each family module.
GPU_KERNELS: dict[str, type] = {}

ACT_NONE, ACT_RELU, ACT_CLAMP, ACT_SIGMOID, ACT_TANH, ACT_ELU, ACT_ABS, ACT_ERF, ACT_GELU_ERF, ACT_GELU_TANH = range(10)
# the Activation types that are one function of the value, by their common.cl codes from 10 on
ACT_FUNCTIONS = {kind: code for code, kind in enumerate(
    ("exp", "log", "floor", "ceil", "round", "trunc", "softplus", "sign", "sin", "cos", "tan", "asin", "acos", "atan",
     "sinh", "cosh", "asinh", "acosh", "atanh", "log1p", "expm1", "softsign"), start=10)}
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
    tunable = False
    residual_ok = False
    places_output = False
    residual = False      # (set by the plan: see residual_ok)
    place = None          # (set by the plan: see places_output)
    skip = frozenset()    # (a Concat's inputs that their producers wrote in place)

    def __init__(self, layer, ctx):
        self.layer = layer
        self.ctx = ctx
        self.ref = reference_kernel(layer)
        self.act = NO_ACTIVATION

    @staticmethod
    def beyond_limits(layer, ref) -> str | None:
        """Why this kernel cannot run `layer` (ref: its CPU kernel) whatever the device, known from the IR
        alone (query_network says so: HETERO then runs it elsewhere), else None."""
        return None

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

    def host_forward(self, inputs) -> list:
        """A host kernel's outputs (float32 arrays) for its inputs."""
        return self.ref.forward(inputs)

    # helpers -----------------------------------------------------------------------
    def prog(self):
        return self.ctx.program(self.program)

    def launch(self, name, args, global_size, local_size=None, program=None) -> Launch:
        """A Launch; without a local size, GPU-style kernels get one (group_for)."""
        program = program or self.prog()
        global_size = tuple(int(g) for g in global_size)
        if local_size is None and self.ctx.style == "simt":
            local_size = group_for(global_size, self.ctx.max_group(program, name), self.ctx.device.max_item_sizes)
        return Launch(program, name, tuple(args), global_size,
                      None if local_size is None else tuple(int(v) for v in local_size))

    def act_args(self) -> list:
        code, a, b = self.act
        return [np.int32(code), np.float32(a), np.float32(b)]


GROUP = 256  # work items a group of the element-wise kernels, at most


def group_for(global_size: tuple, kernel_limit: int, item_limits: tuple) -> tuple:
    """A work group for a kernel whose global size divides by it: powers of two
    that divide each dimension, dimension 0 (the contiguous one) first, up to
    GROUP work items. Left to itself NVIDIA's driver picked groups that are the
    likely cause of the H200 profile's slow element-wise steps (3x3 poolings of
    100 K values at 35 us, an LRN of 600 K at 150 us)."""
    budget = max(1, min(GROUP, kernel_limit))
    local = []
    for dim, size in enumerate(global_size):
        cap = min(budget, item_limits[dim] if dim < len(item_limits) else 1)
        step = 1
        while size % (step * 2) == 0 and step * 2 <= cap:
            step *= 2
        local.append(step)
        budget //= step
    return tuple(local)


def channel_layout(shape) -> tuple[int, int, int]:
    """(outer, channels, inner) of a tensor with the channel axis 1 (rank 1: the
    only axis is the channel axis, as the CPU kernels read it)."""
    if len(shape) == 1:
        return 1, int(shape[0]), 1
    inner = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return int(shape[0]), int(shape[1]), inner


class ConfigRejected(Exception):
    """A configuration the device cannot run for this kernel (its work group is
    larger than the compiled kernel allows)."""


class Tunable(GpuKernel):
    """A kernel with variants (configurations of kernels/tiles.py): the plan's
    tuner lists them with configs(mode), then applies one with use(config).
    Device copies of the weights are made per packing and kept for the
    configuration in use."""
    tunable = True
    config: dict | None = None

    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        self._packs: dict = {}

    def tune_key(self) -> str:
        """The problem, as the tuning cache keys it (with the device and precision)."""
        raise NotImplementedError

    def configs(self, mode: str) -> list[dict]:
        raise NotImplementedError

    def verify(self, config) -> bool:
        """Whether the tuner compares this configuration's results with a trusted
        configuration's before taking it: the tensor-core GEMM, which relies on
        the device's PTX."""
        return config["kernel"] in MMA_KINDS

    def use(self, config: dict, keep_others: bool = False):
        """Applies `config` (ConfigRejected if the device cannot run it); the device
        weights of other packings are dropped unless keep_others (while tuning)."""
        self.config = dict(config)
        self._apply(self.config)
        if not keep_others:
            self._packs = {k: v for k, v in self._packs.items() if k == self._pack_key}

    def _apply(self, config):
        raise NotImplementedError

    def _pack(self, key, make):
        """The device buffer of packing `key` (made once by make())."""
        self._pack_key = key
        if key not in self._packs:
            self._packs[key] = make()
        return self._packs[key]

    def _mma_program(self, config, extra: tuple = ()):
        """tiled.cl's conv_mma built for a configuration (ConfigRejected where this plan cannot run it)."""
        if not mma_valid(config, self.ctx.device) or not 1 <= config["ks"] <= 64 or not self.ctx.mma:
            raise ConfigRejected(f"{config} is not a tensor-core configuration this plan can run")
        program = self.ctx.program("tiled.cl", defines=mma_defines(config, self.ctx.mma == "emulate") + extra)
        if self.ctx.max_group(program, "conv_mma") < mma_threads(config):
            raise ConfigRejected(f"a work group of {mma_threads(config)} is more than the device allows for {config}")
        return program

    def _gemm(self, args, n: int, m: int, groups: int, sums: list, channels: int) -> list:
        """tiled.cl's GEMM of the configuration in use (conv_mma for a tensor-core one,
        else conv_tiled) over n columns, m rows a group and `groups` groups, its K
        cut into the configuration's ks slices; then, with ks > 1, splitk_sum (`sums`:
        its arguments) over the n columns of `channels` rows."""
        cfg = self.config
        columns, ks = -(-n // cfg["tn"]), cfg["ks"]
        if cfg["kernel"] in MMA_KINDS:
            threads = mma_threads(cfg)
            gemm = self.launch("conv_mma", args, (columns * threads, -(-m // cfg["tm"]), groups * ks),
                               (threads, 1, 1), program=self._program)
        else:
            rm, rn = cfg["tm"] // cfg["wm"], cfg["tn"] // cfg["wn"]
            gemm = self.launch("conv_tiled", args, (columns * rn, -(-m // cfg["tm"]) * rm, groups * ks),
                               (rn, rm, 1), program=self._program)
        if ks == 1:
            return [gemm]
        return [gemm, self.launch("splitk_sum", sums, (round_up(n, 32), channels), program=self._program)]

    def _tiled_program(self, config, extra: tuple = ()):
        """tiled.cl built for a "tiled" configuration's tile sizes (and `extra` -D options)."""
        if not tile_valid(config, self.ctx.device) or not 1 <= config["ks"] <= 64:
            raise ConfigRejected(f"{config} is not a tile configuration the device can run")
        program = self.ctx.program("tiled.cl", defines=tile_defines(config) + tuple(extra))
        if self.ctx.max_group(program, "conv_tiled") < tile_threads(config):
            raise ConfigRejected(f"a work group of {tile_threads(config)} is more than the device allows for "
                                 f"{config}")
        return program
