"""Runs of oneDNN steps executed by one C call (native/sequence.c): the compiler
groups consecutive steps that are nothing but bound primitives, and a run without
per-layer counters executes each group with one call from Python. Python between two
primitives cost about 2 us a step on average (MobileNetV3Small: 0.16 ms over 75 steps),
and tens of us after a layer whose weights streamed through the caches and evicted the
interpreter's code and data (one cffi call: 3.4 -> 42.5 us after 32 MB were copied).
With counters (-pc) every step still runs and is timed on its own."""
from __future__ import annotations

from ..native import sequence as native
from .library import DnnlError, NativeUnavailable
from .primitives import Primitive

MIN_STEPS = 2  # (a single step gains nothing from the C loop)


class PrimitiveSequence:
    """Steps whose run is their primitives in order (NativeStep, ReorderStep), as one call."""

    def __init__(self, d, stream, steps: list):
        self.steps = steps
        self.prims = [p for step in steps for p in step.prims]
        ffi, self.lib = native.library()
        dffi = d.ffi
        address = lambda cdata: int(dffi.cast("uintptr_t", cdata))  # noqa: E731
        self._execute = address(dffi.addressof(d.lib, "dnnl_primitive_execute"))
        self._stream = address(stream)
        self._prims = ffi.new("uintptr_t[]", [address(p.prim) for p in self.prims])
        self._args = ffi.new("uintptr_t[]", [address(p._args) for p in self.prims])
        self._nargs = ffi.new("int32_t[]", [p._n for p in self.prims])
        self._status = ffi.new("int32_t *")

    def run(self, slots):
        failed = self.lib.mo_run_sequence(self._execute, self._prims, self._stream, self._nargs, self._args,
                                          len(self.prims), self._status)
        if failed >= 0:
            raise DnnlError(f"executing {self.prims[failed].what}", self._status[0])


def schedule(d, stream, steps: list, native_types: tuple) -> list:
    """`steps` with each run of MIN_STEPS or more consecutive steps of `native_types`
    that only execute bound primitives (no output bound per run) replaced by one
    PrimitiveSequence; `steps` as they are where the C loop cannot be built."""
    try:
        native.load()
    except NativeUnavailable:
        return list(steps)
    out, run = [], []

    def close():
        if len(run) >= MIN_STEPS:
            out.append(PrimitiveSequence(d, stream, list(run)))
        else:
            out.extend(run)
        run.clear()

    for step in steps:
        if type(step) in native_types and step.writes is None and all(type(p) is Primitive for p in step.prims):
            run.append(step)
            continue
        close()
        out.append(step)
    close()
    return out
