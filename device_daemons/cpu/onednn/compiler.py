"""compile_program(plan): the plan's steps at its current shapes turned into a
Program where every layer oneDNN can run is a oneDNN step and the rest stay numpy.

- The choice is per layer: a layer type with an op (OPS) whose primitive can be
  made for these attributes and shapes runs on oneDNN; anything else (custom
  kernels, unsupported types or variants, oneDNN offering only its slow reference
  implementation) runs its numpy kernel. `program.fallbacks` says why per layer.
- Sub-graphs of mobile networks run as one step (patterns.py: hard-swish and swish
  written as x * gate(x), broadcast Eltwise written with Tile).
- Activations (and scalar or per-channel ScaleShifts) that read only a layer's
  output are fused into it as post-ops (they show as "fused" in -pc).
- Precision (plan.precision, precision.py): in bf16 every op that can computes in
  bf16; one that cannot (no bf16 primitive, or only oneDNN's reference code) is made
  in f32 and the reorders around it convert. Network inputs are read f32 and outputs
  written f32. Each step's precision shows in -pc.
- Layouts: each primitive picks its own (blocked, e.g. nChw16c), a convolution the one
  its input has where that is a fast one; tensors stay in them between oneDNN layers.
  Reorders are explicit steps, made only where a layer wants another layout or type,
  where a numpy layer or the caller reads a tensor (Export: a new plain array) and
  where a numpy array feeds a oneDNN layer (Import); each says why in -pc.
- Memory: oneDNN tensors live in one arena per program (arena.py), their offsets
  planned once, memory objects and primitive arguments bound once; a oneDNN step at
  run time is one call per primitive. Element-wise layers run in place when nobody
  else reads their input.
- Weights are reordered into the layout a primitive wants once per network (op.py),
  shared by the plans of that network.
"""
from __future__ import annotations

import numpy as np

from ...plan_io import frees
from ..kernels import KERNELS
from ..program import NumpyStep, Program
from . import (concat, convolution, eltwise, fully_connected, normalization, permute, pooling, reshape,  # noqa: F401
               roi_crop)  # (OPS)
from ..native import team_pinning
from . import patterns, sequence
from .slices import SplitPart, split_parts
from .arena import place
from .eltwise import ActivationOp, EltwiseOp, unary_post_ops
from .library import DnnlError, NativeUnavailable, load
from .op import OPS, Unsupported, aligned_buffer
from .primitives import Attr, Desc, Memory, Primitive, reorder_pd

BACKEND = "onednn"


class Tensor:
    """A oneDNN tensor in the arena: its layout, memory object and lifetime."""
    __slots__ = ("desc", "memory", "size", "first", "last", "offset")

    def __init__(self, d, desc: Desc, index: int):
        self.desc, self.memory = desc, Memory(d, desc)
        self.size = desc.size
        self.first = self.last = index
        self.offset = 0

    def use(self, index: int):
        self.last = max(self.last, index)


class AliasTensor:
    """A view of a tensor with other dims (Reshape, Flatten), of a part of it (what a
    Crop's reorder reads) or of one block of it from `offset` bytes on (a Split's part
    along its first axis): the same memory, its own desc; using it keeps the tensor it
    views alive. A view of a view views the tensor under both."""
    __slots__ = ("desc", "memory", "base", "offset")

    def __init__(self, d, desc: Desc, base: "Tensor | AliasTensor", offset: int = 0):
        if isinstance(base, AliasTensor):
            offset += base.offset
            base = base.base
        self.desc, self.memory, self.base, self.offset = desc, Memory(d, desc), base, offset

    def use(self, index: int):
        self.base.use(index)


def converts(source: Desc, target: Desc) -> str:
    """A reorder's precision for -pc: "bf16" or "f32", or "f32>bf16" where it converts."""
    a, b = source.dt, target.dt
    return a if a == b else f"{a}>{b}"


class _Kernels:
    """A step's `kernel_name` for -pc: oneDNN's implementations of its primitives (`prims`,
    or its one `prim`), each once ("jit:uni+brgconv:avx512_core"); "" for our own C code."""

    @property
    def kernel_name(self) -> str:
        names = []
        for prim in self.prims if hasattr(self, "prims") else [self.prim]:
            name = getattr(prim, "implementation", "")
            if name and name not in names:
                names.append(name)
        return "+".join(names)


class NativeStep(_Kernels):
    backend = BACKEND
    free = ()
    writes: "BoundOutput | None" = None  # the network output it writes in place, if any
    note = ""  # why it exists (a reorder), for -pc

    def __init__(self, name, type_, prims, stream, layers, precision="f32"):
        self.name, self.type, self.prims, self.stream, self.layers = name, type_, prims, stream, layers
        self.precision = precision

    def run(self, slots):
        if self.writes is not None:
            self.writes.bind(slots)
        for prim in self.prims:
            prim.run(self.stream)


def destination(program, name: str | None, shape: tuple) -> np.ndarray:
    """Where a network output goes: the array run(out=...) gave for it when it can be
    written as it is, else a new one."""
    out = program.dests.get(name) if name is not None else None
    if (out is None or out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous
            or not out.flags.writeable):
        out = np.empty(shape, np.float32)
    return out


class ImportStep(_Kernels):
    """A numpy array (network input or a numpy layer's output) into a oneDNN tensor."""
    backend = BACKEND
    type = "Reorder"
    layers = ()

    def __init__(self, d, name, slot, shape, target: Tensor, stream, note=""):
        self.name, self.slot, self.stream, self.note = name, slot, stream, note
        self.source = Memory(d, Desc.plain(d, shape))
        self.precision = converts(self.source.desc, target.desc)
        self.prim = Primitive(d, reorder_pd(d, Attr(d), self.source.desc, target.desc))
        self.prim.bind({"DNNL_ARG_FROM": self.source, "DNNL_ARG_TO": target.memory})
        self.free = ()

    def run(self, slots):
        x = slots[self.slot]
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        self.source.set_buffer(x)
        self.prim.run(self.stream)
        for s in self.free:
            slots[s] = None


class BoundInput:
    """A network input that oneDNN layers read where the caller's array is: its plain
    layout is the one they want, so no reorder; bound per run (NativeProgram._run)."""
    __slots__ = ("desc", "memory")

    def __init__(self, d, desc: Desc):
        self.desc, self.memory = desc, Memory(d, desc)

    def use(self, index: int):
        pass  # not in the arena: the caller's array lives through the run


class BindStep:
    """A numpy layer's output that oneDNN layers read where it is (they want its plain
    f32 layout): its array is bound to their memory object as the run reaches it, in
    place of an Import copy; the memory keeps the array alive until the run ends."""
    backend = BACKEND
    type = "Bind"
    layers = ()
    precision = "f32"
    hidden = True  # (no -pc row: nothing is computed or copied)
    note = ""

    def __init__(self, name, slot, memory: Memory):
        self.name, self.slot, self.memory = name, slot, memory
        self.free = ()

    def run(self, slots):
        x = slots[self.slot]
        if x.dtype != np.float32 or not x.flags.c_contiguous:
            x = np.ascontiguousarray(x, np.float32)
        self.memory.set_buffer(x)
        for s in self.free:
            slots[s] = None


class BoundOutput(BoundInput):
    """A network output its oneDNN producer writes in plain layout: written where the
    caller wants it (run(out=...): the daemon's shared-memory slot) or into a new array,
    with no Export reorder after it; bound by the producing step (NativeStep.writes)."""
    __slots__ = ("slot", "name", "shape", "program")

    def __init__(self, d, desc: Desc, slot: int, name: str, shape):
        super().__init__(d, desc)
        self.slot, self.name, self.shape = slot, name, tuple(shape)
        self.program = None  # set by the compiler

    def bind(self, slots):
        out = destination(self.program, self.name, self.shape)
        self.memory.set_buffer(out)
        slots[self.slot] = out


class ExportStep(_Kernels):
    """A oneDNN tensor into a plain numpy array (for a numpy layer or the caller): a
    new one, or for a network output the destination run(out=...) gave (the daemon's
    shared-memory slot, so the reply needs no copy)."""
    backend = BACKEND
    type = "Reorder"
    layers = ()
    free = ()

    def __init__(self, d, name, slot, shape, source: Tensor, stream, output: str | None = None, note=""):
        self.name, self.slot, self.shape, self.stream, self.note = name, slot, tuple(shape), stream, note
        self.output = output
        self.program = None  # set by the compiler: run(out=...) destinations are its `dests`
        self.target = Memory(d, Desc.plain(d, shape))
        self.precision = converts(source.desc, self.target.desc)
        self.prim = Primitive(d, reorder_pd(d, Attr(d), source.desc, self.target.desc))
        self.prim.bind({"DNNL_ARG_FROM": source.memory, "DNNL_ARG_TO": self.target})

    def run(self, slots):
        out = destination(self.program, self.output, self.shape)
        self.target.set_buffer(out)
        self.prim.run(self.stream)
        slots[self.slot] = out


class ReorderStep(NativeStep):
    type = "Reorder"

    def __init__(self, d, name, source: Tensor, target: Tensor, stream, note=""):
        prim = Primitive(d, reorder_pd(d, Attr(d), source.desc, target.desc))
        prim.bind({"DNNL_ARG_FROM": source.memory, "DNNL_ARG_TO": target.memory})
        super().__init__(name, "Reorder", [prim], stream, (), converts(source.desc, target.desc))
        self.note = note


class NativeProgram(Program):
    def __init__(self, steps, n_slots, outputs, fused, d, stream, arena, scratchpad, fallbacks, threads, precision):
        super().__init__(steps, n_slots, outputs, BACKEND, fused, precision)
        self.d, self.stream = d, stream
        self.arena, self.scratchpad = arena, scratchpad  # kept alive: memory objects point into them
        self.fallbacks = fallbacks
        self.threads = threads  # OpenMP threads its primitives were made for (None: all)
        # a team of every CPU runs pinned, a thread per CPU (native/team_pinning.py)
        pin = team_pinning.team_size()
        self.pinned = pin > 0 and (threads or d.default_threads) == pin
        self.bound: list[tuple[int, Memory]] = []  # (input slot, memory read where its array is)
        # numpy layers' outputs read where they are: released after each run, as the inputs
        self.late_bound: list[Memory] = [s.memory for s in self.steps if isinstance(s, BindStep)]
        self.bound_outputs: list[BoundOutput] = []

    def _run(self, values, perf):
        if self.bound:
            given = dict(values)
            for slot, memory in self.bound:
                x = given[slot]
                memory.set_buffer(x if x.flags.c_contiguous else np.ascontiguousarray(x))
        if self.threads is not None:
            self.d.set_threads(self.threads)
        pinned = self.pinned and team_pinning.pin_team()
        try:
            return super()._run(values, perf)
        finally:
            if pinned:
                team_pinning.unpin()
            if self.threads is not None:
                self.d.set_threads(None)
            for _, memory in self.bound:
                memory.buffer = None  # the caller's array is not kept past the run
            for memory in self.late_bound:
                memory.buffer = None
            for output in self.bound_outputs:
                output.memory.buffer = None

    def finish(self):
        status = self.d.lib.dnnl_stream_wait(self.stream)
        if status:
            raise DnnlError("waiting for the stream", status)


class _Compiler:
    def __init__(self, plan, threads, use_patterns=True):
        self.d = load()
        self.plan = plan
        self.threads = threads
        self.precision = plan.precision
        self.stream = self.d.new_stream()
        self.shapes = plan.shapes
        self.outputs = {s for _, s in plan._outputs}
        run_steps = split_parts(plan.run_steps)  # (a Split: a step per output, each a reorder: slices.py)
        self.consumers = self.readers(run_steps, ())
        # the steps as the compiler runs them: patterns.py gives some other inputs
        self.steps, self.rewrite = (patterns.find(run_steps, self.shapes, self.outputs, self.consumers)
                                    if use_patterns else (run_steps, patterns.Rewrite({}, {})))
        self.consumers = self.readers(self.steps, self.rewrite.absorbed)
        self.final: list = []
        self.tensors: list[Tensor] = []
        self.tensor_of: dict[int, Tensor] = {}
        self.converted: dict[int, list] = {}
        self.has_numpy = set(plan._input_slots.values())
        self.network_inputs = set(plan._input_slots.values())
        self.scratch_memories: list[Memory] = []
        self.fallbacks: dict[str, str] = {}
        self.inplace: list[str] = []  # layers that overwrite their input
        self.bound: list[tuple[int, Memory]] = []
        self.bound_outputs: list[BoundOutput] = []
        self.aliases: list[AliasTensor] = []
        self.viewed: set[int] = set()  # slots whose memory a view shares: never written in place
        self.views: list = []  # (layer, precision) of the layers that are views
        self.output_name = {}
        for name, s in plan._outputs:
            self.output_name.setdefault(s, name)

    @staticmethod
    def readers(steps, skipped) -> dict[int, list[int]]:
        consumers: dict[int, list[int]] = {}
        for i, step in enumerate(steps):
            if i not in skipped:
                for s in step.in_slots:
                    consumers.setdefault(s, []).append(i)
        return consumers

    # --- per layer choice and fusing ------------------------------------------------------
    def make_ops(self):
        ops = {}
        for i, step in enumerate(self.steps):
            if i in self.rewrite.absorbed:
                continue
            special = self.rewrite.ops.get(i)
            if special is not None:
                if special[0] == "activation":
                    ops[i] = ActivationOp(step, step.kernel, self.d, self.plan.network, special[1])
                else:
                    ops[i] = EltwiseOp(step, step.kernel, self.d, self.plan.network, broadcast=True)
                continue
            cls = OPS.get(step.layer.type)
            if cls is None or step.is_custom or (type(step.kernel) is not KERNELS.get(step.layer.type)
                                                 and type(step.kernel) is not SplitPart):
                continue
            if len(step.out_slots) != 1 or not step.in_slots:
                continue
            ops[i] = cls(step, step.kernel, self.d, self.plan.network)
        return ops

    def fuse(self, ops):
        """{activation step: step it is fused into}, {step: the slot it finally writes}."""
        fused, out_slot = {}, {}
        for i, op in ops.items():  # a step an op computes too (the crop's max pooling), before activations
            slot = self.steps[i].out_slots[0]
            readers = self.consumers.get(slot, ())
            if slot not in self.outputs and len(readers) == 1 and readers[0] in ops and readers[0] not in fused:
                j = readers[0]
                if op.absorbs(self.steps[j], self.shapes[slot], self.shapes[self.steps[j].out_slots[0]]):
                    fused[j] = i
                    out_slot[i] = self.steps[j].out_slots[0]
        for i, op in ops.items():
            if op.accepts_post_ops and i not in fused and not self.lone_eltwise(i, ops):
                out_slot[i] = self.activation_chain(op, i, out_slot.get(i, self.steps[i].out_slots[0]), ops, fused)
        return fused, out_slot

    def lone_eltwise(self, i, ops) -> bool:
        """Step i is an element-wise layer that is one eltwise primitive: oneDNN has no jit eltwise
        with post-ops (its reference kernel took 270 ms for a bias + GELU over 1.2 M values that the
        jit kernels do in 1 ms as two steps), so the activations after it run as steps of their own."""
        own = self.post_ops_of(i, ops)
        return bool(own) and own[0][0] == "eltwise"

    def post_ops_of(self, j, ops) -> list | None:
        """The post-ops computing step j when it is a one-input element-wise op."""
        op = ops.get(j)
        if not isinstance(op, ActivationOp) or len(self.steps[j].in_slots) != 1:
            return None
        return op.ops if op.ops is not None else unary_post_ops(self.steps[j], self.shapes[self.steps[j].in_slots[0]])

    def activation_chain(self, op, i, slot, ops, fused):
        """Fuses the activations that alone read `slot` (then their outputs) into op i;
        returns the slot written last."""
        while slot not in self.outputs and len(self.consumers.get(slot, ())) == 1:
            j = self.consumers[slot][0]
            post = self.post_ops_of(j, ops) if j not in fused else None
            if not post or j in fused.values():  # (j runs activations fused into it: taking j alone lost them)
                break
            for p in post:
                op.fuse(p)
            fused[j] = i
            slot = self.steps[j].out_slots[0]
        return slot

    def sum_target(self, i, slot, ops, fused):
        """(Eltwise step, its other input slot, that input's coefficient) when the only
        reader of `slot` is a two-input Eltwise sum (coefficient 1 for `slot`) whose other
        input is a oneDNN tensor already made that no step from step i on reads but the
        Eltwise (a residual shortcut whose other readers ran): the convolution i then
        adds its result into that tensor (a sum post-op) and the Eltwise disappears."""
        if slot in self.outputs or len(self.consumers.get(slot, ())) != 1:
            return None
        j = self.consumers[slot][0]
        step = self.steps[j]
        if j not in ops or j in fused or step.layer.type != "Eltwise" or len(step.in_slots) != 2:
            return None
        if step.kernel.op != "sum" or step.in_slots[0] == step.in_slots[1] or getattr(ops[j], "broadcast", False):
            return None
        mine = step.in_slots.index(slot)
        other = step.in_slots[1 - mine]
        coeff = step.kernel.coeff or [1.0, 1.0]
        if coeff[mine] != 1.0 or other not in self.tensor_of or other in self.outputs or other in self.viewed:
            return None
        if any(c != j and c >= i for c in self.consumers.get(other, ())):
            return None
        return j, other, coeff[1 - mine]

    def create(self, op, i, step, out_slot, ops, fused):
        """op.create in the plan's precision, else in f32 (a layer without a bf16
        primitive, or with only oneDNN's reference one); see create_in."""
        if self.precision == "f32":
            return self.create_in("f32", op, i, step, out_slot, ops, fused)
        try:
            return self.create_in(self.precision, op, i, step, out_slot, ops, fused)
        except (Unsupported, DnnlError):
            return self.create_in("f32", op, i, step, out_slot, ops, fused)

    def create_in(self, dt, op, i, step, out_slot, ops, fused):
        """op.create in type dt, first with the result summed into an Eltwise's other input
        where that applies; (wanted input layouts, output layouts, slot written, the tensor
        summed into or None). Unsupported / DnnlError: not in this type."""
        op.dt, op.forced = dt, dt != self.precision
        in_descs = [self.tensor_of[s].desc if s in self.tensor_of else None for s in step.in_slots]
        if op.forced:  # what follows its input's layout takes it converted
            in_descs = [desc.retyped(dt) if desc is not None else None for desc in in_descs]
        in_shapes = [self.shapes[s] for s in step.in_slots]
        slot = out_slot.get(i, step.out_slots[0])
        target = self.sum_target(i, slot, ops, fused) if op.accepts_sum else None
        if target is not None:
            j, other, scale = target
            saved, added = list(op.post_ops), {j}
            op.post_ops.append(("sum", scale))
            fused[j] = i
            before = set(fused)
            end = self.activation_chain(op, i, self.steps[j].out_slots[0], ops, fused)
            added |= set(fused) - before
            op.dst_hint = self.tensor_of[other].desc
            op.out_f32 = end in self.outputs
            try:
                want, outs = op.create(in_descs, in_shapes, [self.shapes[end]])
                if outs[0] == op.dst_hint and not self.slow(op, dt):
                    return want, outs, end, self.tensor_of[other]
            except (Unsupported, DnnlError):
                pass
            op.post_ops, op.dst_hint = saved, None  # add it up on its own then
            for k in added:
                del fused[k]
        op.out_f32 = slot in self.outputs
        want, outs = op.create(in_descs, in_shapes, [self.shapes[slot]])
        if self.slow(op, dt):
            raise Unsupported(f"oneDNN has only its reference {op.layer.type} in {dt}")
        return want, outs, slot, None

    @staticmethod
    def slow(op, dt) -> bool:
        """A bf16 primitive that is oneDNN's reference code (the f32 one is faster)."""
        pd = getattr(op, "pd", None)
        return dt != "f32" and pd is not None and pd.implementation.startswith("ref")

    # --- tensors ----------------------------------------------------------------------------
    def new_tensor(self, desc: Desc) -> Tensor:
        t = Tensor(self.d, desc, len(self.final))
        self.tensors.append(t)
        return t

    def ensure_numpy(self, slot: int, why: str, reader=None):
        """The slot's value as a numpy array from here on (an Export step if it is a oneDNN
        tensor); `reader`: the numpy step that reads it (None: a network output)."""
        if slot in self.has_numpy:
            return
        t = self.tensor_of[slot]
        t.use(len(self.final))
        if reader is None:
            note = "a network output: plain f32 for the caller"
        else:
            note = (f"{reader.layer.type} {reader.layer.name} runs on numpy"
                    f" ({self.fallbacks.get(reader.layer.name, 'no oneDNN primitive for this type')})")
        self.final.append(ExportStep(self.d, f"{self.plan._slot_names[slot]}/to_{why}", slot, self.shapes[slot], t,
                                     self.stream, self.output_name.get(slot), note))
        self.has_numpy.add(slot)

    def tensor_for(self, slot: int, want: Desc, reader) -> Tensor:
        primary = self.tensor_of.get(slot)
        if primary is not None and primary.desc == want:
            return primary
        for desc, t in self.converted.get(slot, ()):
            if desc == want:
                return t
        name = self.plan._slot_names[slot]
        wants = f"{reader.layer.type} {reader.layer.name} reads {want.layout()} {want.dt}"
        if primary is None and slot in self.network_inputs and want == Desc.plain(self.d, self.shapes[slot]):
            t = BoundInput(self.d, want)
            self.bound.append((slot, t.memory))
        elif primary is None and want == Desc.plain(self.d, self.shapes[slot]):  # a numpy layer's output
            t = BoundInput(self.d, want)
            self.final.append(BindStep(f"{name}/bind", slot, t.memory))
            self.viewed.add(slot)  # (its array: never overwritten in place)
        elif isinstance(primary, (Tensor, AliasTensor)) and primary.desc.same_bytes(want):  # read as they are
            t = AliasTensor(self.d, want, primary)
            self.aliases.append(t)
            self.viewed.add(slot)
        elif primary is not None:
            t = self.new_tensor(want)
            primary.use(len(self.final))
            self.final.append(ReorderStep(self.d, f"{name}/reorder", primary, t, self.stream,
                                          f"{wants}; its producer wrote {primary.desc.layout()} {primary.desc.dt}"))
        else:
            t = self.new_tensor(want)
            source = "a network input" if slot in self.network_inputs else "a numpy layer's output"
            self.final.append(ImportStep(self.d, f"{name}/to_onednn", slot, self.shapes[slot], t, self.stream,
                                         f"{wants}; {source} is plain f32"))
        self.converted.setdefault(slot, []).append((want, t))
        return t

    def scratch(self, pd) -> Memory:
        m = Memory(self.d, pd.md("scratchpad_md"))
        self.scratch_memories.append(m)
        return m

    def exclusive(self, slot: int, reader: int) -> bool:
        """Whether `reader` may overwrite the slot's tensor: its last reader (the others ran
        before it: squeeze-excite's product over the tensor the pooling read), not an output."""
        readers = self.consumers.get(slot, [])
        return (slot not in self.outputs and slot not in self.viewed and readers.count(reader) == 1
                and all(r < reader for r in readers if r != reader))

    # --- the program --------------------------------------------------------------------------
    def compile(self) -> NativeProgram:
        plan, steps = self.plan, self.steps
        ops = self.make_ops()
        fused, out_slot = self.fuse(ops)
        for i, step in enumerate(steps):
            if i in fused or i in self.rewrite.absorbed:
                continue
            op = ops.get(i)
            if op is not None:
                try:
                    want, outs, slot, summed = self.create(op, i, step, out_slot, ops, fused)
                except (Unsupported, DnnlError) as err:
                    self.fallbacks[step.layer.name] = str(err)
                    op = None
                    for j in [j for j, into in fused.items() if into == i]:
                        del fused[j]  # the activations run on their own again
            if op is None:
                if i in self.rewrite.ops:  # a pattern oneDNN could not run after all: its layers as they are
                    raise _Unpatterned(step.layer.name, self.fallbacks.get(step.layer.name, ""))
                for s in step.in_slots:
                    self.ensure_numpy(s, "numpy", step)
                self.final.append(self.kernel_step(step))
                self.has_numpy.update(step.out_slots)
                continue
            ins = [self.tensor_for(s, w, step) for s, w in zip(step.in_slots, want)]
            if getattr(op, "view", False):
                if not isinstance(ins[0], (Tensor, AliasTensor)):  # (a network input read where it is)
                    self.fallbacks[step.layer.name] = "a view of a network input: numpy's"
                    self.final.append(self.kernel_step(step))
                    self.has_numpy.update(step.out_slots)
                    continue
                alias = AliasTensor(self.d, outs[0], ins[0], op.view_offset)
                self.aliases.append(alias)
                self.tensor_of[slot] = alias
                self.viewed.update((step.in_slots[0], slot))
                self.views.append((step.layer, op.precision))
                alias.use(len(self.final))
                if slot in self.outputs:
                    self.ensure_numpy(slot, "output")
                continue
            index = len(self.final)
            for t in ins:
                t.use(index)
            first = step.in_slots[0]
            if summed is not None:
                out = summed  # the result is added into it: it becomes the Eltwise's output
                out.use(index)
            elif (op.inplace and ins[0] is self.tensor_of.get(first) and ins[0].desc == outs[0]
                    and self.exclusive(first, i)):
                out = ins[0]
                self.inplace.append(step.layer.name)
            elif (slot in self.outputs and outs[0] == Desc.plain(self.d, self.shapes[slot])
                    and op.dst_view is None):
                # written where the caller wants the output: no Export reorder
                out = BoundOutput(self.d, outs[0], slot, self.output_name[slot], self.shapes[slot])
                self.bound_outputs.append(out)
                self.has_numpy.add(slot)
            else:
                out = self.new_tensor(outs[0])
            self.tensor_of[slot] = out
            written = out.memory
            if op.dst_view is not None:  # it writes its output described otherwise
                view = AliasTensor(self.d, op.dst_view, out)
                self.aliases.append(view)
                written = view.memory
            read = [t.memory for t in ins]
            if op.src_view is not None:  # it reads its input described otherwise
                view = AliasTensor(self.d, op.src_view, ins[0])
                self.aliases.append(view)
                read[0] = view.memory
            prims = op.bind(read, [written], self.scratch)
            layers = (step.layer,) + tuple(steps[j].layer for j, into in fused.items() if into == i)
            self.final.append(NativeStep(step.layer.name, step.layer.type, prims, self.stream, layers, op.precision))
            if op.step_backend:
                self.final[-1].backend = op.step_backend
            if isinstance(out, BoundOutput):
                self.final[-1].writes = out
            if slot in self.outputs:
                self.ensure_numpy(slot, "output")
        self.set_frees()
        arena = self.allocate()
        program = NativeProgram(self.final, plan._n_slots, plan._outputs, self.fused_rows(fused), self.d, self.stream,
                                *arena, self.fallbacks, self.threads, self.precision)
        program.schedule = sequence.schedule(self.d, self.stream, self.final, (NativeStep, ReorderStep))
        program.views = self.views
        program.folded = list(plan.folded)
        program.inplace = self.inplace
        program.bound = self.bound
        program.bound_outputs = self.bound_outputs
        for step in self.final:
            if isinstance(step, ExportStep):
                step.program = program
        for output in self.bound_outputs:
            output.program = program
        return program

    def fused_rows(self, fused) -> list:
        """(layer, the step it runs in) for every layer computed inside another step:
        fused activations and the layers of a pattern (followed to the step that runs)."""
        into = dict(self.rewrite.absorbed)
        into.update(fused)
        rows = []
        for j in sorted(into):
            host = into[j]
            while host in into:
                host = into[host]
            rows.append((self.steps[j].layer, self.steps[host].layer.name))
        return rows

    def kernel_step(self, step) -> NumpyStep:
        """A layer oneDNN does not run: its Python kernel, switched to the kernel's
        native variant where it has one (e.g. DetectionOutput's NMS in C)."""
        out = NumpyStep(step, self.shapes, ())
        if not out.note:  # (a folded layer's says why it runs here)
            out.note = self.fallbacks.get(step.layer.name, "" if step.is_custom else "no oneDNN op for this layer type")
        if step.is_custom:
            return out
        try:
            native = getattr(step.kernel, "accelerate", lambda: None)()
        except NativeUnavailable as err:
            self.fallbacks[step.layer.name] = str(err)
        else:
            if native:
                out.backend = native
        return out

    def set_frees(self):
        # the numpy arrays in slots: what numpy steps read, and the callers' arrays Import/Bind steps take
        reads = [step.in_slots if isinstance(step, NumpyStep) else (step.slot,)
                 if isinstance(step, (ImportStep, BindStep)) else () for step in self.final]
        for step, free in zip(self.final, frees(reads, self.outputs)):
            if free:
                step.free = free

    def allocate(self):
        size = place(self.tensors)
        arena = aligned_buffer(max(size, 64))
        raw = arena.view(np.uint8)
        for t in self.tensors:
            t.memory.set_buffer(raw[t.offset:t.offset + t.size])
        for a in self.aliases:
            a.memory.set_buffer(raw[a.base.offset + a.offset:a.base.offset + a.base.size])
        pad = max((m.desc.size for m in self.scratch_memories), default=0)
        scratchpad = aligned_buffer(max(pad, 64)).view(np.uint8)
        for m in self.scratch_memories:
            m.set_buffer(scratchpad)
        return arena, scratchpad


class _Unpatterned(Exception):
    """A pattern's step found no primitive: the program is compiled again without patterns."""


def compile_program(plan, threads: int | None = None) -> NativeProgram:
    """threads: OpenMP threads for the program's primitives (None: all, the latency
    case); the daemon asks for fewer when requests run side by side."""
    d = load()
    if threads is not None:
        d.set_threads(threads)
    try:
        try:
            return _Compiler(plan, threads).compile()
        except _Unpatterned:
            return _Compiler(plan, threads, use_patterns=False).compile()
    finally:
        if threads is not None:
            d.set_threads(None)
