"""ExecutionPlan: an IR network compiled once for the numpy CPU kernels.

    from ir import read_ir
    from device_daemons.cpu import ExecutionPlan, load_custom_kernels
    plan = ExecutionPlan(read_ir("net.xml", "net.bin"),
                         custom_kernels=load_custom_kernels("my_layers.py"))   # optional
    outputs = plan.infer({"data": image})        # {output layer name: array}
    plan.reshape({"data": (2, 3, 224, 224)})     # another batch: shapes re-inferred

Compilation: the strides of 1x1 convolutions pulled up the graph where that saves
work (strides.py: ResNet's stage transitions); per input shapes, the layers whose
outputs cannot change computed once (folding.py: prior boxes); layers in topological
order (layers without inputs first: Input and the reading Memory layers, so a state is read before it is written in a call);
one kernel per layer (a custom kernel for a type replaces the built-in one); every
(layer, output port) is a slot; a slot is dropped as soon as its last consumer
ran (reference counts computed once), so numpy can reuse the memory; an
activation (or another kernel with `supports_inplace`) overwrites its input when
nobody else reads that buffer: not a network input or output, no other consumer,
and not a view (Reshape, Split, Crop, ...) of a buffer that someone else reads.

Outputs are keyed by the name of the layer producing them; a layer with several
unconsumed outputs gives "name.port" keys (`extra_outputs` adds intermediate
layers, as an Inference Engine addOutput). Returned arrays are new each call,
never overwritten by a later one. A plan runs one infer at a time: kernels keep
scratch buffers (im2col columns, padded planes) between calls. Blobs of FP16 IRs
are converted to float32 once. `precision` "f32" (the default of a plan made
in-process) or "bf16" (the layers oneDNN runs in bf16, precision.py; the CPU
daemon's default where the CPU has bf16); inputs and outputs are float32 either way.
`threads`: the OpenMP threads of a call (default: the CPUs of the affinity mask).
Inputs are checked by name, shape and dtype (float or integer arrays are converted
to float32).

Custom kernels (the OpenCV DNN style of the reference guide): a Python file
defines classes with a `type` (or `layer_type`) attribute naming the IR layer
type they compute - a string or a list of strings - and the methods

    __init__(self, layer)                  # ir.Layer: layer.data attributes, layer.blobs
    getMemoryShapes(self, input_shapes)    # list of tuples -> list of output shapes
    forward(self, inputs)                  # list of float32 arrays -> list of arrays
    finalize(self, layer)                  # optional, after every (re)shape; port dims are current

`load_custom_kernels(path)` imports the file and returns {type: class};
`add_extension(path_or_mapping)` registers them for every plan made afterwards
(what `-l FILE` does). A class may set `supports_inplace = True` to be allowed to
write into inputs[0] when the plan sets its `inplace` attribute; a custom kernel
is assumed to possibly return views of its inputs unless it sets
`output_is_view = False`.
"""
from __future__ import annotations

import copy
import importlib.util
import inspect
import itertools
import os
import sys
from dataclasses import dataclass

import numpy as np

from core.microkernel.heap import keep_freed_buffers
from core.services.caffe_worker import DEFINITION_ATTR as CAFFE_DEFINITION
from ir import IRError, Network

from ..plan_io import (PlanShapes, check_computed_shape, check_inputs, check_reshape, execution_order, frees,
                       output_ports)
from .backends import build_program, requested_backend
from .folding import fold
from .kernels import KERNELS, KernelError
from .kernels.base import describe
from .precision import CPUS, resolve_precision, resolve_threads
from .strides import pull_strides

_SOURCE_TYPES = ("Input",)
_GLOBAL_CUSTOM: dict[str, type] = {}
_module_counter = itertools.count()


def _kernel_types(cls) -> list[str]:
    value = getattr(cls, "type", None)
    if not isinstance(value, (str, list, tuple)):
        value = getattr(cls, "layer_type", None)
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return []


def load_custom_kernels(path) -> dict[str, type]:
    """Imports the Python file `path` and returns {IR type: class} for every class
    defined there with a `type` or `layer_type` attribute (see the module doc)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise IRError(f"cannot find the custom kernel file {path}; check the path given to -l / add_extension")
    name = f"_mo_core_cpu_extension_{next(_module_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise IRError(f"cannot import the custom kernel file {path}: it is not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # the user's code: report it, do not crash the daemon
        sys.modules.pop(name, None)
        raise IRError(f"importing the custom kernel file {path} failed: {type(err).__name__}: {err}") from err
    found: dict[str, type] = {}
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ != name:
            continue
        types = _kernel_types(cls)
        if not types:
            continue
        missing = [m for m in ("getMemoryShapes", "forward") if not callable(getattr(cls, m, None))]
        if missing:
            raise IRError(f"custom kernel class {cls.__name__} in {path} (type {types[0]}) has no "
                          f"{' and no '.join(missing)} method; a CPU kernel needs getMemoryShapes(input_shapes) "
                          "and forward(inputs)")
        for t in types:
            found[t] = cls
    if not found:
        raise IRError(f"the custom kernel file {path} defines no kernel class: give each class a `type` (or "
                      "`layer_type`) attribute with the IR layer type it computes")
    return found


def add_extension(source) -> dict[str, type]:
    """Registers custom kernels for all plans built afterwards: a file path (as
    load_custom_kernels), a {type: class} mapping or a single class."""
    if isinstance(source, (str, os.PathLike)):
        kernels = load_custom_kernels(source)
    elif isinstance(source, dict):
        kernels = dict(source)
    elif inspect.isclass(source) and _kernel_types(source):
        kernels = {t: source for t in _kernel_types(source)}
    else:
        raise IRError("add_extension takes a Python file path, a {type: class} mapping or a kernel class with a "
                      "`type` attribute")
    _GLOBAL_CUSTOM.update(kernels)
    return kernels


@dataclass
class _Step:
    layer: object
    kernel: object
    in_slots: tuple
    out_slots: tuple
    free: tuple          # slots whose last reader is this step
    is_custom: bool


class ExecutionPlan(PlanShapes):
    def __init__(self, network: Network, custom_kernels: dict[str, type] | None = None,
                 extra_outputs=None, backend: str | None = None, precision: str = "f32", threads: int | None = None):
        """extra_outputs: names of layers whose outputs infer() also returns (as an
        Inference Engine addOutput), e.g. to compare intermediate results.
        backend: "auto" (oneDNN where it runs a layer, else numpy), "onednn" (the same,
        but an error if oneDNN cannot load) or "numpy"; default $MO_CORE_CPU_BACKEND
        or "auto" (device_daemons/cpu/backends.py). precision: "f32" or "bf16" (None:
        the CPU's default, precision.py); threads: OpenMP threads (None or 0: all CPUs)."""
        keep_freed_buffers()  # (numpy kernels allocate their arrays per call)
        self.backend = requested_backend(backend)
        self.threads = resolve_threads(threads)
        self.precision = "f32" if self.backend == "numpy" else resolve_precision(precision)
        self.network = network
        self.custom_kernels = dict(_GLOBAL_CUSTOM)
        self.custom_kernels.update(custom_kernels or {})
        self.states: dict = {}
        self.warnings: list[str] = []
        # (what the steps run; `network` stays the key of the weights oneDNN keeps per network)
        graph = pull_strides(network, keep=extra_outputs or (), skip_types=self.custom_kernels)
        order = execution_order(graph)

        producer = {}  # (to_layer, to_port) -> (from_layer, from_port)
        for e in graph.edges:
            producer[(e.to_layer, e.to_port)] = (e.from_layer, e.from_port)

        self._slot_of: dict[tuple[int, int], int] = {}
        self._slot_names: list[str] = []
        self._slot_producer: list[int] = []  # step index (-1 for network inputs)
        self._input_slots: dict[str, int] = {}
        self._input_layers: dict[str, object] = {}
        consumers: dict[int, list[int]] = {}
        steps_raw = []
        for layer in order:
            for port in layer.outputs:
                self._slot_of[(layer.id, port.id)] = len(self._slot_names)
                self._slot_names.append(f"{layer.name}.{port.id}")
                self._slot_producer.append(-1)
            if layer.type in _SOURCE_TYPES and layer.type not in self.custom_kernels:
                if len(layer.outputs) != 1 or layer.inputs:
                    raise KernelError(layer, "an Input layer must have no input and exactly one output port")
                self._input_slots[layer.name] = self._slot_of[(layer.id, layer.outputs[0].id)]
                self._input_layers[layer.name] = layer
                continue
            in_slots = []
            for port in sorted(layer.inputs, key=lambda p: p.id):
                src = producer.get((layer.id, port.id))
                if src is None or src not in self._slot_of:
                    raise KernelError(layer, f"input port {port.id} is not connected")
                in_slots.append(self._slot_of[src])
            kernel, is_custom = self._make_kernel(layer)
            step_index = len(steps_raw)
            out_slots = tuple(self._slot_of[(layer.id, p.id)] for p in layer.outputs)
            for s in out_slots:
                self._slot_producer[s] = step_index
            for s in in_slots:
                consumers.setdefault(s, []).append(step_index)
            steps_raw.append((layer, kernel, tuple(in_slots), out_slots, is_custom))
            if hasattr(kernel, "states"):
                kernel.states = self.states

        # network outputs: unconsumed output ports
        self._outputs: list[tuple[str, int]] = [(key, self._slot_of[(layer.id, port.id)]) for key, layer, port in
                         output_ports(graph, extra_outputs)]
        output_slots = {s for _, s in self._outputs}

        # the step after which each slot can be dropped
        dropped = frees([in_slots for _, _, in_slots, _, _ in steps_raw], output_slots)

        input_slots = set(self._input_slots.values())

        def exclusive(slot, reader_step, seen=()):
            """True when only `reader_step` reads the buffer behind `slot`."""
            if slot in input_slots or slot in output_slots or slot in seen:
                return False
            readers = consumers.get(slot, [])
            if len(readers) != 1 or readers[0] != reader_step:
                return False
            p = self._slot_producer[slot]
            if p < 0:
                return False
            p_layer, p_kernel, p_in, _, p_custom = steps_raw[p]
            if getattr(p_kernel, "output_is_view", p_custom):
                return all(exclusive(s, p, seen + (slot,)) for s in p_in)
            return True

        self.steps: list[_Step] = []
        for i, (layer, kernel, in_slots, out_slots, is_custom) in enumerate(steps_raw):
            if getattr(kernel, "supports_inplace", False) and in_slots:
                kernel.inplace = exclusive(in_slots[0], i)
            self.steps.append(_Step(layer, kernel, in_slots, out_slots, dropped[i], is_custom))
        self._n_slots = len(self._slot_names)
        self.shapes: list[tuple | None] = [None] * self._n_slots
        self._ir_input_shapes = {name: tuple(l.outputs[0].dims) for name, l in self._input_layers.items()}
        self.reshape({})
        for step in self.steps:
            for port, s in zip(step.layer.outputs, step.out_slots):
                if tuple(port.dims) != self.shapes[s]:
                    self.warnings.append(f"{describe(step.layer)}: output port {port.id} has dims {list(port.dims)} "
                                         f"in the IR, the CPU plugin computes {list(self.shapes[s])}")

    # --- construction helpers ------------------------------------------------------
    def _make_kernel(self, layer):
        cls = self.custom_kernels.get(layer.type)
        is_custom = cls is not None
        if cls is None:
            cls = KERNELS.get(layer.type)
        mapped = CAFFE_DEFINITION in layer.data and not is_custom
        if cls is None or mapped:
            hint = ("It was mapped in CustomLayersMapping.xml and keeps its Caffe definition: run it on a CPU daemon "
                    "started with --caffe-fallback (mo-core daemon start --caffe-fallback), or register" if mapped
                    else "It is a custom layer: register")
            raise KernelError(layer, f"the CPU plugin has no kernel for layer type {layer.type!r}"
                                     f"{' as Caffe defines it' if mapped and cls is not None else ''}. {hint} a "
                                     f"custom CPU kernel for it (a Python class with type = {layer.type!r}, "
                                     f"getMemoryShapes and forward) with -l FILE or add_extension")
        try:
            return cls(layer), is_custom
        except IRError:
            raise
        except Exception as err:
            raise KernelError(layer, f"creating its {'custom ' if is_custom else ''}kernel {cls.__name__} failed: "
                                     f"{type(err).__name__}: {err}") from err

    # --- shapes ----------------------------------------------------------------------
    def reshape(self, input_shapes: dict[str, tuple]):
        """Re-infers every shape for new input shapes (e.g. another batch); inputs not
        named keep their current shape. Memory states are reset."""
        current = {name: self.shapes[slot] or self._ir_input_shapes[name] for name, slot in self._input_slots.items()}
        shapes = list(self.shapes)
        for name, shape in check_reshape(input_shapes, current).items():
            shapes[self._input_slots[name]] = shape
        batch = None
        if self._input_slots:
            first = next(iter(self._input_slots))
            batch = shapes[self._input_slots[first]][0] if shapes[self._input_slots[first]] else None
        for step in self.steps:
            kernel = step.kernel
            if batch is not None and hasattr(kernel, "set_batch"):
                kernel.set_batch(batch)
            in_shapes = [shapes[s] for s in step.in_slots]
            try:
                outs = kernel.getMemoryShapes(in_shapes)
            except IRError:
                raise
            except Exception as err:
                raise KernelError(step.layer, f"getMemoryShapes({in_shapes}) failed: {type(err).__name__}: "
                                              f"{err}") from err
            outs = self._check_shapes(step, outs)
            for s, shape in zip(step.out_slots, outs):
                shapes[s] = shape
            finalize = getattr(kernel, "finalize", None)
            if callable(finalize):
                layer = copy.copy(step.layer)
                layer.inputs = [type(p)(p.id, shp) for p, shp in zip(sorted(step.layer.inputs, key=lambda p: p.id),
                                                                      in_shapes)]
                layer.outputs = [type(p)(p.id, shp) for p, shp in zip(step.layer.outputs, outs)]
                try:
                    finalize(layer)
                except IRError:
                    raise
                except Exception as err:
                    raise KernelError(step.layer, f"finalize failed: {type(err).__name__}: {err}") from err
        self.shapes = shapes
        self.states.clear()
        # per shape: the layers whose outputs cannot change folded (folding.py), oneDNN primitives
        # made for these shapes (and threads, when fewer than all)
        self.run_steps, self.folded = fold(self.steps, shapes, {s for _, s in self._outputs})
        self.program = build_program(self, self.threads if self.threads < CPUS else None)
        self._shared_programs: dict[int, object] = {}  # threads -> program (see infer's `concurrent`)

    def reset_state(self):
        """Forgets the Memory layers' states (they read zeros on the next call)."""
        self.states.clear()

    @staticmethod
    def _check_shapes(step, outs):
        try:
            outs = [tuple(int(d) for d in s) for s in outs]
        except (TypeError, ValueError):
            raise KernelError(step.layer, f"getMemoryShapes returned {outs!r}; expected a list of shapes (tuples of "
                                          "integers)") from None
        if len(outs) != len(step.out_slots):
            raise KernelError(step.layer, f"getMemoryShapes returned {len(outs)} shapes for "
                                          f"{len(step.out_slots)} output ports")
        for shape in outs:
            if any(d < 0 for d in shape):
                raise KernelError(step.layer, f"computes an output shape {list(shape)} with negative dims")
            check_computed_shape(step.layer, shape)
        return outs

    # --- inference -------------------------------------------------------------------
    def _check_inputs(self, inputs) -> list:
        values = check_inputs(inputs, self.input_shapes())
        return [(self._input_slots[name], value) for name, value in values.items()]

    def infer(self, inputs: dict, perf: list | None = None, concurrent: int = 1,
              out: dict | None = None) -> dict[str, np.ndarray]:
        """{output name: array}; with `perf` (a list) one contract.PerfRow per step is appended
        (layer, type, backend, ms: what `infer -pc` prints). `concurrent`: how many
        requests run at the same time in this process (the daemon's plan pool); above
        one, oneDNN runs with cpus / concurrent threads (a program made for that many,
        once) instead of every request spreading over all cores. `out` {output name:
        float32 array of its shape}: where to put outputs (Program.run)."""
        return self._program(concurrent).run(self._check_inputs(inputs), perf, out)

    @property
    def precision_used(self) -> str:
        """The precision its program computes in (f32 when every layer runs on numpy)."""
        return self.program.precision if self.program.backend != "numpy" else "f32"

    def prepare(self, concurrent: int) -> None:
        """Make now the program that infer(concurrent=...) would make on its first request."""
        self._program(concurrent)

    def _program(self, concurrent: int):
        if concurrent <= 1 or self.program.backend == "numpy":
            return self.program
        threads = max(1, self.threads // concurrent)
        program = self._shared_programs.get(threads)
        if program is None:
            program = self._shared_programs[threads] = build_program(self, threads)
        return program


def load_plan(xml_path, bin_path=None, custom_kernels=None) -> ExecutionPlan:
    """read_ir + ExecutionPlan."""
    from ir import read_ir
    return ExecutionPlan(read_ir(xml_path, bin_path), custom_kernels)
