"""GpuPlan: an IR network compiled once for an OpenCL device.

    from ir import read_ir
    from device_daemons.gpu import GpuPlan
    plan = GpuPlan(read_ir("net.xml"))            # the default device: open_device("GPU")
    outputs = plan.infer({"data": image})        # {output layer name: float32 array}
    plan.reshape({"data": (2, 3, 224, 224)})     # another batch: shapes re-inferred, memory re-planned

Compilation (once per network): one GPU kernel per layer (a GPU custom layer for
its type wins over the built-in kernel); weights are uploaded once and shared by
all requests; programs are built once per process (programs.py). An activation
that is the only reader of a convolution / fully connected / eltwise /
scale-shift output runs in that layer's epilogue. Shapes come from the layers'
CPU kernels (the reference for what an IR means).

Memory (once per shape, memory.py): every tensor lives on the device for the
whole request; tensors share device buffers by lifetime (whole buffers, never
sub-buffers).

Requests: `create_request()` makes an InferRequest with its own command queue,
buffers and kernel objects (arguments set once). Requests of one plan run
concurrently from different threads; `infer()` borrows an idle request (making
one when all are busy), so concurrent infer() calls are safe and each in-flight
call has its own queue.

Precision: tensors and weights are stored as float32, or as half when the IR is
FP16 (`precision` overrides); arithmetic is float32 either way (common.cl).
Inputs and outputs are float32 arrays.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl

from ir import IRError

from ..cpu.kernels import KernelError
from ..plan_io import PlanShapes, check_computed_shape, check_inputs, check_reshape, execution_order, output_ports
from .device import open_device
from .kernels import GPU_KERNELS
from .kernels.activation import activation_code
from .kernels.base import NO_ACTIVATION
from .kernels.convolution import MAX_SIBLINGS
from .kernels.tiles import tile_config, tile_defines
from .memory import Block, Groups, align, assign_buffers
from .programs import BuildError, builtin_program
from .tuning import Tuner

_MAX_ELEMENTS = 2**31 - 1  # of one tensor: the kernels index with int


def network_precision(network) -> str:
    """FP16 when every computing layer of the IR is FP16, else FP32."""
    precisions = {layer.precision for layer in network.layers if layer.type != "Input"}
    return "FP16" if precisions == {"FP16"} else "FP32"


STYLES = ("simt", "simd")
ENV_MERGE = "MO_CORE_GPU_MERGE"  # 0: no sibling convolutions in one GEMM, no pooling read through
ENV_STYLE = "MO_CORE_GPU_STYLE"  # forces a style (e.g. the GPU kernels on PoCL, to test them there)
ENV_MMA = "MO_CORE_GPU_MMA"  # 0: no tensor-core kernels; emulate: their emulation on any device (tests)


class EngineContext:
    """What GPU kernels use to reach the device: programs, uploads, work-group sizes,
    and the style of kernels that suits it: "simt" for GPUs (many scalar work
    items, neighbours reading neighbouring addresses), "simd" for CPU OpenCL
    devices such as PoCL (vectors inside a work item; they run a work group as a
    loop and often do not vectorize across its work items)."""

    def __init__(self, device, half: bool, style: str | None = None):
        self.device = device
        self.half = half
        self.style = style or os.environ.get(ENV_STYLE, "").strip() or ("simt" if device.is_gpu else "simd")
        if self.style not in STYLES:
            raise IRError(f"kernel style {self.style!r} (the GPU plan's style argument or {ENV_STYLE}) is not one "
                          f"of {', '.join(STYLES)}")
        self.dtype = np.dtype(np.float16 if half else np.float32)
        # tensor-core convolutions (half plans of the "simt" style): "nv" on a device with them, "emulate"
        # (their register layout in plain OpenCL, slow: tests) when MO_CORE_GPU_MMA says so, else ""
        mma = os.environ.get(ENV_MMA, "").strip().lower()
        if mma not in ("", "0", "1", "emulate"):
            raise IRError(f"{ENV_MMA}={mma!r}: use 0, 1 or emulate")
        usable = half and self.style == "simt"
        self.mma = "emulate" if usable and mma == "emulate" else \
            "nv" if usable and mma != "0" and device.tensor_cores else ""
        self._ints: dict[bytes, cl.Buffer] = {}
        self._group_limits: dict = {}
        self.dummy = self.upload(np.zeros(1, np.float32))
        self.dummy_ints = self.upload_ints(np.zeros(1))

    def program(self, filename: str, half: bool | None = None, defines: tuple = ()):
        """The built program of a kernel file; `defines`: -D options of a variant."""
        return builtin_program(self.device, filename, self.half if half is None else half, defines)

    def max_group(self, program, name: str) -> int:
        """The largest work group the compiled kernel `name` of `program` allows."""
        key = (id(program), name)
        if key not in self._group_limits:
            self._group_limits[key] = (program, int(cl.Kernel(program, name).get_work_group_info(
                cl.kernel_work_group_info.WORK_GROUP_SIZE, self.device.cl_device)))
        return self._group_limits[key][1]

    def upload(self, array, dtype=None) -> cl.Buffer:
        """A read-only device copy of `array` in the storage type (or `dtype`)."""
        a = np.ascontiguousarray(array, dtype or self.dtype)
        if a.size == 0:
            a = np.zeros(1, a.dtype)
        return cl.Buffer(self.device.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=a)

    def upload_ints(self, array) -> cl.Buffer:
        """A read-only int32 buffer, shared by every caller with the same values."""
        a = np.ascontiguousarray(array, np.int32)
        key = a.tobytes()
        if key not in self._ints:
            self._ints[key] = self.upload(a, np.int32)
        return self._ints[key]

    def group_size(self, program, name: str, preferred: int) -> int:
        """The largest power of two <= preferred that the kernel and device allow."""
        limit = cl.Kernel(program, name).get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE,
                                                             self.device.cl_device)
        size = 1
        while size * 2 <= min(preferred, limit, self.device.max_work_group):
            size *= 2
        return size


@dataclass
class _Step:
    layer: object
    kernel: object
    in_slots: tuple
    out_slots: tuple
    fused: bool = False          # an activation or Eltwise sum run by the step that produces its input
    fused_into: str = ""         # (the name of that step's layer)
    root: int = -1               # (that step's index)
    alias: int = -1              # (the slot of that step's output this step's output is)
    residual: int | None = None  # the slot of a fused Eltwise sum's other input (read in the epilogue)
    scratch: list = field(default_factory=list)  # slots of this step's scratch buffers
    extra_writes: tuple = ()     # slots of other steps' outputs this step computes (sibling convolutions)
    merged_into: str = ""        # the layer of the step that computes this one's output (its sibling)

    def reads(self) -> tuple:
        return self.in_slots + ((self.residual,) if self.residual is not None else ())


class GpuPlan(PlanShapes):
    def __init__(self, network, device=None, custom_layers=None, precision: str | None = None,
                 extra_outputs=None, style: str | None = None, tune: str | None = None, tuner=None):
        """custom_layers: a CustomLayers (custom.py) of GPU custom kernels, or None.
        extra_outputs: names of layers whose outputs infer() also returns.
        style: "simt" or "simd" kernels (EngineContext); default: MO_CORE_GPU_STYLE, else by device type.
        tune: "0", "1" or "full" (tuning.py; default: MO_CORE_GPU_TUNE, else by device type),
        or tuner: a tuning.Tuner."""
        self.network = network
        self.device = device if device is not None else open_device("GPU")
        self.precision = precision or network_precision(network)
        if self.precision not in ("FP32", "FP16"):
            raise IRError(f"precision {self.precision!r} is not supported by the GPU plugin; use FP32 or FP16")
        self.ctx = EngineContext(self.device, self.precision == "FP16", style)
        self.custom_layers = custom_layers
        self.tuner = tuner if tuner is not None else Tuner(self.device, tune)
        self.tuning_s = 0.0  # seconds the tuner spent searching (all reshapes; builds and timed runs)
        self.ran = False  # a request has run since the last (re)shape: the driver's compile is done (request.py)
        self.warnings: list[str] = []

        producer = {(e.to_layer, e.to_port): (e.from_layer, e.from_port) for e in network.edges}
        slot_of: dict[tuple[int, int], int] = {}
        self._slot_names: list[str] = []
        self._input_slots: dict[str, int] = {}
        self._ir_input_shapes: dict[str, tuple] = {}
        self.steps: list[_Step] = []
        for layer in execution_order(network):
            for port in layer.outputs:
                slot_of[(layer.id, port.id)] = len(self._slot_names)
                self._slot_names.append(f"{layer.name}.{port.id}")
            if layer.type == "Input" and not self._is_custom(layer.type):
                if len(layer.outputs) != 1 or layer.inputs:
                    raise KernelError(layer, "an Input layer must have no input and exactly one output port")
                self._input_slots[layer.name] = slot_of[(layer.id, layer.outputs[0].id)]
                self._ir_input_shapes[layer.name] = tuple(layer.outputs[0].dims)
                continue
            in_slots = []
            for port in sorted(layer.inputs, key=lambda p: p.id):
                src = producer.get((layer.id, port.id))
                if src is None or src not in slot_of:
                    raise KernelError(layer, f"input port {port.id} is not connected")
                in_slots.append(slot_of[src])
            self.steps.append(_Step(layer, self._make_kernel(layer), tuple(in_slots),
                                    tuple(slot_of[(layer.id, p.id)] for p in layer.outputs)))
        self._outputs = [(key, slot_of[(layer.id, port.id)]) for key, layer, port in
                         output_ports(network, extra_outputs)]
        self._n_slots = len(self._slot_names)
        self._fuse_sums()
        self._fuse_activations()
        self._merge_siblings()
        self._read_through_poolings()
        self._lock = threading.Lock()
        self._idle: list = []
        self._generation = 0
        self.shapes: list[tuple | None] = [None] * self._n_slots
        self._current_inputs = dict(self._ir_input_shapes)
        self.reshape({})
        for step in self.steps:
            for port, s in zip(step.layer.outputs, step.out_slots):
                if tuple(port.dims) != self.shapes[s]:
                    self.warnings.append(f"layer {step.layer.name!r} (type {step.layer.type}): output port "
                                         f"{port.id} has dims {list(port.dims)} in the IR, the GPU plugin "
                                         f"computes {list(self.shapes[s])}")

    # --- construction ------------------------------------------------------------
    def _is_custom(self, layer_type: str) -> bool:
        return self.custom_layers is not None and layer_type in self.custom_layers

    def _make_kernel(self, layer):
        if self._is_custom(layer.type):
            return self.custom_layers.kernel(layer, self.ctx)
        cls = GPU_KERNELS.get(layer.type)
        if cls is None:
            error = KernelError(layer, f"layer type {layer.type!r} is not supported by the GPU plugin; run the "
                                       "network with -d HETERO:GPU,CPU (the layers the GPU lacks run on the CPU), "
                                       "or register a GPU custom layer for it (an .xml + .cl given with -c FILE)")
            error.kind = "network"  # the daemons' error kind: the network, not a kernel, is the problem
            raise error
        try:
            return cls(layer, self.ctx)
        except IRError:
            raise
        except cl.Error as err:
            raise KernelError(layer, f"preparing it on {self.device.full_name} failed: {err}") from err

    def _builtin(self, step) -> bool:
        """The step runs the plugin's own kernel for its type (not a custom layer:
        the user's code is never fused into or changed)."""
        return type(step.kernel) is GPU_KERNELS.get(step.layer.type)

    def _readers(self) -> dict[int, int]:
        readers: dict[int, int] = {}
        for st in self.steps:
            for s in st.reads():
                readers[s] = readers.get(s, 0) + 1
        return readers

    def _producers(self) -> dict[int, int]:
        return {s: i for i, st in enumerate(self.steps) for s in st.out_slots}

    def _fuse(self, step, root: int, alias: int):
        step.fused, step.root, step.alias = True, root, alias
        step.fused_into = self.steps[root].layer.name

    def _fuse_sums(self):
        """An Eltwise sum (coefficients 1) of two tensors of one shape runs in the
        epilogue of the convolution that makes one of them, when nothing else reads
        that convolution's output and the other tensor is made before it (the later
        producer of the two takes it: ResNet's projection shortcuts)."""
        producer, readers = self._producers(), self._readers()
        returned = {s for _, s in self._outputs}
        for st in self.steps:
            ref = st.kernel.ref
            if st.layer.type != "Eltwise" or not self._builtin(st) or ref.op != "sum" or len(st.in_slots) != 2 \
                    or any(float(c) != 1.0 for c in (ref.coeff or [])) or st.in_slots[0] == st.in_slots[1]:
                continue
            dims = [tuple(p.dims) for p in sorted(st.layer.inputs, key=lambda p: p.id)]
            if dims[0] != dims[1]:
                continue
            best = None
            for mine, other in (st.in_slots, st.in_slots[::-1]):
                p = producer.get(mine)
                if p is None:
                    continue
                prod = self.steps[p]
                q = producer.get(other, -1)  # -1: a network input
                if prod.fused or not self._builtin(prod) or not prod.kernel.residual_ok or prod.residual is not None \
                        or readers[mine] != 1 or mine in returned or len(prod.out_slots) != 1 or q >= p:
                    continue
                if best is None or p > best[0]:
                    best = (p, mine, other)
            if best is not None:
                p, mine, other = best
                self.steps[p].residual = other
                self.steps[p].kernel.residual = True
                self._fuse(st, p, mine)

    def _fuse_activations(self):
        """An activation whose input is only read by it runs in its producer's epilogue."""
        producer, readers = self._producers(), self._readers()
        returned = {s for _, s in self._outputs}
        for st in self.steps:
            if not self._builtin(st) or len(st.in_slots) != 1:
                continue  # (a custom kernel for an activation type is the user's code: never fused)
            code = activation_code(st.kernel)
            src = st.in_slots[0]
            if code is None or src not in producer or readers[src] != 1 or src in returned:
                continue
            root = producer[src]
            while self.steps[root].fused:  # an Eltwise sum fused into a convolution
                root = self.steps[root].root
            prod = self.steps[root]
            if not prod.kernel.fuses_activation or prod.kernel.act != NO_ACTIVATION or len(prod.out_slots) != 1:
                continue
            prod.kernel.act = code
            self._fuse(st, root, src)

    def _variant_builds(self, define: str) -> bool:
        """Does tiled.cl build with `define` on this device (a tile every device
        runs)? A driver that refuses it keeps the layers apart, with a warning,
        instead of failing the network."""
        try:
            self.ctx.program("tiled.cl", defines=tile_defines(tile_config(32, 32, 16, 4, 4)) + (define,))
            return True
        except (BuildError, cl.Error) as exc:
            self.warnings.append(f"tiled.cl {define} does not build on {self.device.full_name}, the layers it would "
                                 f"merge run apart: {str(exc).strip().splitlines()[-1][:300]}")
            return False

    def _merge_siblings(self):
        """Convolutions of one input with the same window, group 1 and activation
        (an inception block's 1x1, 3x3_reduce and 5x5_reduce) run as one GEMM
        launched by the first of them, up to MAX_SIBLINGS a launch (kernels/
        convolution.py); "simt" kernels only, MO_CORE_GPU_MERGE=0 turns it off."""
        if self.ctx.style != "simt" or os.environ.get(ENV_MERGE, "").strip() == "0" or \
                not self._variant_builds("-DSIBLINGS"):
            return
        groups: dict = {}
        for i, st in enumerate(self.steps):
            if st.fused or st.layer.type != "Convolution" or not self._builtin(st) or len(st.in_slots) != 1 \
                    or st.residual is not None or len(st.out_slots) != 1:
                continue
            key = st.kernel.sibling_key()
            if key is not None:
                groups.setdefault((st.in_slots[0], key), []).append(i)
        for members in groups.values():
            for first in range(0, len(members) - 1, MAX_SIBLINGS):
                chunk = members[first:first + MAX_SIBLINGS]
                if len(chunk) < 2:
                    continue
                lead = self.steps[chunk[0]]
                lead.kernel.siblings = tuple(self.steps[j].kernel for j in chunk[1:])
                lead.extra_writes = tuple(self.steps[j].out_slots[0] for j in chunk[1:])
                for j in chunk[1:]:
                    self.steps[j].merged_into = lead.layer.name
                    self.steps[j].kernel.absorbed_by = lead.layer.name

    def _read_through_poolings(self):
        """A max pooling of stride 1 that keeps the image's size, read only by a 1x1
        convolution (stride 1, no padding, group 1, no siblings): the convolution
        reads the pooling's input and takes each window's maximum itself (kernels/
        convolution.py's `pooled`); the pooling launches nothing. "simt" only,
        MO_CORE_GPU_MERGE=0 turns it off."""
        if self.ctx.style != "simt" or os.environ.get(ENV_MERGE, "").strip() == "0" or \
                not self._variant_builds("-DPOOLED"):
            return
        readers = self._readers()
        returned = {s for _, s in self._outputs}
        by_input: dict = {}
        for i, st in enumerate(self.steps):
            for s in st.reads():
                by_input.setdefault(s, []).append(i)
        for st in self.steps:
            if st.layer.type != "Pooling" or not self._builtin(st) or st.fused or st.merged_into \
                    or len(st.in_slots) != 1 or len(st.out_slots) != 1:
                continue
            ref = st.kernel.ref
            if len(ref.kernel) != 2:  # (a 3-D window: its own launch, volume.cl's pool3d)
                continue
            (kh, kw), (sh, sw), (ph, pw), (phe, pwe) = ref.kernel, ref.stride, ref.pad, ref.pad_end
            out = st.out_slots[0]
            if ref.method != "max" or (sh, sw) != (1, 1) or ph + phe != kh - 1 or pw + pwe != kw - 1 \
                    or readers.get(out) != 1 or out in returned:
                continue
            conv = self.steps[by_input[out][0]]
            k = conv.kernel
            if conv.layer.type != "Convolution" or not self._builtin(conv) or conv.fused or conv.merged_into \
                    or k.siblings or conv.in_slots != (out,) or not k.one or k.ref.group != 1:
                continue
            conv.in_slots = (st.in_slots[0],)
            k.pooled = (kh, kw, ph, pw)
            st.merged_into = conv.layer.name

    def _place_concats(self):
        """Producers that write straight into their slice of a Concat's output
        (axis 1): a convolution or Permute whose output (through fused layers and
        views that keep the first dimension) nothing but the Concat reads. The
        Concat then copies only its other inputs. Returns the slots joined into
        each Concat's output: {concat output slot: [slots]}."""
        for st in self.steps:
            if self._builtin(st):
                st.kernel.place = None
                st.kernel.skip = set()
        producer, readers = self._producers(), self._readers()
        pinned = {s for _, s in self._outputs} | set(self._input_slots.values())
        joined: dict[int, list] = {}
        for st in self.steps:
            if st.fused or st.layer.type != "Concat" or not self._builtin(st):
                continue
            out_shape = self.shapes[st.out_slots[0]]
            axis = st.kernel.ref.axis + len(out_shape) if st.kernel.ref.axis < 0 else st.kernel.ref.axis
            if axis != 1 or len(out_shape) < 2:
                continue
            inner = int(np.prod(out_shape[2:]))
            offset = 0
            for k, s in enumerate(st.in_slots):
                found = None if st.in_slots.count(s) > 1 else self._placeable(s, out_shape[0], producer, readers,
                                                                               pinned)
                if found is not None:
                    root, chain = found
                    self.steps[root].kernel.place = (offset, out_shape[1] * inner)
                    st.kernel.skip.add(k)
                    joined.setdefault(st.out_slots[0], []).extend(chain)
                offset += self.shapes[s][1] * inner
        return joined

    def _placeable(self, slot, images, producer, readers, pinned):
        """(index of the step that computes `slot`, the slots on the way) when that
        step can write `slot` into a Concat's buffer, else None."""
        chain, cur = [], slot
        while True:
            if cur in pinned or readers.get(cur) != 1 or cur not in producer or self.shapes[cur][0] != images:
                return None
            chain.append(cur)
            st = self.steps[producer[cur]]
            if st.fused:
                cur = st.alias
            elif st.kernel.view and st.in_slots:
                cur = st.in_slots[0]
            elif st.kernel.places_output and self._builtin(st) and len(st.out_slots) == 1 and st.kernel.place is None:
                return producer[cur], chain
            else:
                return None

    # --- shapes and memory -----------------------------------------------------------
    def reshape(self, input_shapes: dict):
        """Re-infers every shape for new input shapes (e.g. another batch) and re-plans
        the memory; inputs not named keep their current shape. Requests made before
        are dropped."""
        current = check_reshape(input_shapes, self._current_inputs)
        self.ran = False  # (new work sizes: PoCL compiles again)
        shapes: list = [None] * self._n_slots
        for name, slot in self._input_slots.items():
            shapes[slot] = current[name]
        for step in self.steps:
            in_shapes = [shapes[s] for s in step.in_slots]
            try:
                outs = step.kernel.shapes(in_shapes)
            except IRError:
                raise
            except Exception as err:
                raise KernelError(step.layer, f"computing the output shapes for inputs {in_shapes} failed: "
                                              f"{type(err).__name__}: {err}") from err
            if len(outs) != len(step.out_slots):
                raise KernelError(step.layer, f"computes {len(outs)} outputs for {len(step.out_slots)} output ports")
            for s, shape in zip(step.out_slots, outs):
                shapes[s] = check_computed_shape(step.layer, shape, _MAX_ELEMENTS)
        self.shapes = shapes
        self._current_inputs = current
        for step in self.steps:
            if not step.fused:  # (the first of sibling convolutions sees its siblings' outputs too)
                step.kernel.configure([shapes[s] for s in step.in_slots],
                                      [shapes[s] for s in step.out_slots + step.extra_writes])
        self._tune()
        self._plan_memory(self._place_concats())
        with self._lock:
            self._generation += 1
            self._idle = []

    def _tune(self):
        """Each tunable kernel's configuration for these shapes (tuning.py)."""
        before = self.tuner.spent_s
        try:
            for step in self.steps:
                if not step.fused and not step.merged_into and step.kernel.tunable:
                    self.tuner.choose(step.kernel, self.precision)
        finally:
            self.tuner.release()
        self.tuning_s += self.tuner.spent_s - before
        for message in self.tuner.warnings:
            if message not in self.warnings:
                self.warnings.append(message)

    def _plan_memory(self, placed: dict):
        """placed: {a Concat's output slot: the slots written into it} (_place_concats)."""
        itemsize = self.ctx.dtype.itemsize
        n_steps = len(self.steps)
        scratch_sizes: list[int] = []
        for st in self.steps:
            sizes = [] if st.fused or st.merged_into else list(getattr(st.kernel, "scratch_bytes", lambda: [])())
            st.scratch = list(range(self._n_slots + len(scratch_sizes), self._n_slots + len(scratch_sizes) + len(sizes)))
            scratch_sizes += sizes
        total = self._n_slots + len(scratch_sizes)
        groups = Groups(total)
        last_read = [-2] * total
        for i, st in enumerate(self.steps):
            for s in st.reads():
                last_read[s] = i
        first_write = [-1] * total
        for i, st in enumerate(self.steps):
            for s in list(st.out_slots) + st.scratch:
                first_write[s] = i
            for s in st.scratch:
                last_read[s] = i
        for i, st in enumerate(self.steps):  # a sibling convolution's output is written by the first sibling
            for s in st.extra_writes:
                first_write[s] = min(first_write[s], i)
        returned = {s for _, s in self._outputs}
        inputs = set(self._input_slots.values())
        constant = {s for st in self.steps if st.kernel.constant for s in st.out_slots}
        group_last = list(last_read)
        group_pinned = [s in returned or s in inputs or s in constant for s in range(total)]

        def join(member, root):
            root = groups.find(root)
            groups.join(member, root)
            group_last[root] = max(group_last[root], group_last[member])
            group_pinned[root] = group_pinned[root] or group_pinned[member]

        for target, slots in placed.items():
            for s in slots:
                join(s, target)
        for i, st in enumerate(self.steps):
            if st.fused:
                join(st.out_slots[0], st.alias)
            elif st.kernel.view:
                join(st.out_slots[0], st.in_slots[0])
            elif st.kernel.inplace and st.in_slots and st.kernel.place is None:
                root = groups.find(st.in_slots[0])
                if not group_pinned[root] and group_last[root] <= i and \
                        self._nbytes(st.out_slots[0]) == self._nbytes(st.in_slots[0]):
                    join(st.out_slots[0], root)
        self._groups = groups
        self._constant_roots = {groups.find(s) for s in constant}
        blocks: dict[int, Block] = {}
        for s in range(total):
            root = groups.find(s)
            if root in self._constant_roots:
                continue
            size = scratch_sizes[s - self._n_slots] if s >= self._n_slots else self._nbytes(s, itemsize)
            start = -1 if s in inputs else first_write[s]
            end = n_steps if s in returned else max(last_read[s], start)
            b = blocks.get(root)
            if b is None:
                blocks[root] = Block(start, end, align(max(size, 1), self.device.align))
            else:
                b.start, b.end = min(b.start, start), max(b.end, end)
                b.size = max(b.size, align(max(size, 1), self.device.align))
        self.buffer_sizes = assign_buffers(blocks)
        self.arena_bytes = sum(self.buffer_sizes)  # device memory a request holds
        if max(self.buffer_sizes, default=0) > self.device.max_allocation:
            raise IRError(f"a tensor of the network needs {max(self.buffer_sizes) >> 20} MB of device memory at "
                          f"these shapes, more than the {self.device.max_allocation >> 20} MB one buffer may have on "
                          f"{self.device.full_name}; use a smaller batch or input, or the CPU")
        self._blocks = blocks
        self._constants = {}
        for st in self.steps:
            if st.kernel.constant:
                outs = st.kernel.ref.forward([np.broadcast_to(np.float32(0), self.shapes[s]) for s in st.in_slots])
                for s, value in zip(st.out_slots, outs):
                    self._constants[groups.find(s)] = self.ctx.upload(value)

    def _nbytes(self, slot, itemsize=None) -> int:
        return int(np.prod(self.shapes[slot])) * (itemsize or self.ctx.dtype.itemsize)

    # --- inference -------------------------------------------------------------------
    def create_request(self):
        from .request import InferRequest
        return InferRequest(self)

    def infer(self, inputs: dict, perf: list | None = None) -> dict[str, np.ndarray]:
        """Runs the network on a free request of this plan (thread-safe). With `perf`
        (a list) a contract.PerfRow per step is appended (each step then waits for
        the device: the sum is slower than an uncounted run)."""
        values = check_inputs(inputs, self.input_shapes())
        with self._lock:
            request = self._idle.pop() if self._idle else None
            generation = self._generation
        if request is None:
            request = self.create_request()
        try:
            return request.run(values, perf)
        finally:
            with self._lock:
                if generation == self._generation:
                    self._idle.append(request)

    def reset_state(self):
        """No layer of the GPU plugin keeps a state between calls (a no-op, as in
        the CPU plan's interface)."""
