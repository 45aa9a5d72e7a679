"""What an ExecutionPlan runs: a list of steps over a list of slots, with optional
per-step timing (`infer -pc`).

A step has `run(slots)`, `name`, `type`, `backend`, `layers` (the IR layers it
computes: a fused step computes several), `precision` (f32, bf16, or "f32>bf16" for a
reorder that converts) and `note` (why it is there or why it runs where it does). `NumpyStep` runs one numpy (or custom)
kernel; the oneDNN backend adds its own steps (device_daemons/cpu/onednn/compiler.py).
Slots hold numpy arrays; a step drops the slots whose last reader it is, so numpy
can reuse their memory.
"""
from __future__ import annotations

import time

import numpy as np

from ir import IRError

from ..contract import PerfRow
from .folding import Folded
from .kernels import KernelError


class NumpyStep:
    backend = "numpy"
    precision = "f32"
    note = ""

    def __init__(self, step, shapes, free):
        self.layer = step.layer
        self.name, self.type = step.layer.name, step.layer.type
        self.layers = (step.layer,)
        self.kernel = step.kernel
        self.in_slots, self.out_slots = step.in_slots, step.out_slots
        self.out_shapes = tuple(shapes[s] for s in step.out_slots)
        self.free = tuple(free)
        if step.is_custom:
            self.backend = "custom"
        if isinstance(step.kernel, Folded):
            self.note = Folded.note

    def run(self, slots):
        try:
            outs = self.kernel.forward([slots[s] for s in self.in_slots])
        except IRError:
            raise
        except (Exception, SystemExit) as err:  # (a custom kernel's sys.exit() too: its layer is named)
            raise KernelError(self.layer, f"forward failed: {type(err).__name__}: {err}") from err
        if outs is None or len(outs) != len(self.out_slots):
            raise KernelError(self.layer, f"forward returned {0 if outs is None else len(outs)} outputs for "
                                          f"{len(self.out_slots)} output ports")
        for s, out, shape in zip(self.out_slots, outs, self.out_shapes):
            if type(out) is not np.ndarray or out.dtype != np.float32:
                out = np.asarray(out, dtype=np.float32)
            if out.shape != shape:
                raise KernelError(self.layer, f"forward produced output shape {list(out.shape)} but "
                                              f"getMemoryShapes said {list(shape)}")
            slots[s] = out
        for s in self.free:
            slots[s] = None


class Program:
    """Steps in order over `n_slots` slots; outputs are (name, slot) pairs."""

    def __init__(self, steps, n_slots, outputs, backend: str, fused=(), precision: str = "f32"):
        self.steps = list(steps)
        self.schedule = self.steps  # what a run without counters executes (the oneDNN compiler groups steps)
        self.n_slots = n_slots
        self.outputs = list(outputs)
        self.backend = backend
        self.precision = precision  # the inference precision it was made for
        self.fused = list(fused)  # (layer, step name it was fused into)
        self.views: list = []  # (layer, precision): layers whose output is a view of their input (no step)
        self.folded: list = []  # layers folded away (folding.py: constants for these shapes, no step)
        self.dests: dict = {}  # run(out=...) while it runs: steps that write outputs look here
        self.lent_outputs = _lent_outputs(self.steps, self.outputs)

    def run(self, values, perf: list | None = None, out: dict | None = None) -> dict:
        """values: [(slot, array)]. With `perf` (a list), appends a PerfRow per step.
        `out` {output name: float32 array of its shape}: where outputs go (the daemon's
        shared-memory slot): steps that can write an output there do, the rest are
        copied there at the end; the returned dict then holds those arrays."""
        self.dests = out or {}
        try:
            result = self._run(values, perf)
        finally:
            self.dests = {}
        if out:
            for name, dest in out.items():
                value = result.get(name)
                if value is not None and value is not dest and dest.shape == value.shape:
                    np.copyto(dest, value, casting="unsafe")
                    result[name] = dest
        for name in self.lent_outputs:  # the caller keeps them past the kernel's next run
            value = result.get(name)
            if value is not None and not (out and out.get(name) is value):
                result[name] = np.array(value)
        return result

    def _run(self, values, perf) -> dict:
        slots: list = [None] * self.n_slots
        for slot, value in values:
            slots[slot] = value
        if perf is None:
            for step in self.schedule:
                step.run(slots)
        else:
            clock = time.perf_counter
            precision = {}
            for step in self.steps:
                start = clock()
                step.run(slots)
                if getattr(step, "hidden", False):
                    continue
                perf.append(PerfRow(step.name, step.type, step.backend, "executed", (clock() - start) * 1e3,
                                    step.precision, step.note, getattr(step, "kernel_name", "")))
                precision[step.name] = step.precision
            for layer, into in self.fused:
                perf.append(PerfRow(layer.name, layer.type, "fused into " + into, "fused", 0.0,
                                    precision.get(into, "")))
            for layer, dt in self.views:
                perf.append(PerfRow(layer.name, layer.type, self.backend, "not_run", 0.0, dt,
                                    "a view of its input: nothing to compute"))
            for layer in self.folded:
                perf.append(PerfRow(layer.name, layer.type, "numpy", "not_run", 0.0, "f32", Folded.note))
        self.finish()
        return {name: slots[s] for name, s in self.outputs}

    def finish(self):
        """Waits for the native backend's stream (none here)."""


def _lent_outputs(steps, outputs) -> list[str]:
    """The outputs that are views of a buffer a kernel writes again on its next run
    (Kernel.reuses_output), directly or through kernels that return views of their
    inputs (Reshape, ...; a custom kernel may, unless it says output_is_view = False)."""
    reused = set()
    for step in steps:
        kernel = getattr(step, "kernel", None)
        if kernel is None:
            continue  # a oneDNN step: it writes tensors of its own
        if getattr(kernel, "reuses_output", False) or (
                getattr(kernel, "output_is_view", step.backend == "custom") and reused.intersection(step.in_slots)):
            reused.update(step.out_slots)
    return [name for name, s in outputs if s in reused]


def numpy_program(plan) -> Program:
    steps = [NumpyStep(step, plan.shapes, step.free) for step in plan.run_steps]
    program = Program(steps, plan._n_slots, plan._outputs, "numpy")
    program.folded = list(plan.folded)
    return program
