"""Which kernels run a plan: the oneDNN backend where it runs a layer, numpy elsewhere.

MO_CORE_CPU_BACKEND (or ExecutionPlan(backend=...)):
  auto    (default) oneDNN for every layer it has a primitive for, the numpy kernels
          for the rest; if oneDNN cannot be loaded here, numpy with a warning
  onednn  the same, but a plan fails with the reason when oneDNN cannot be loaded
  numpy   the numpy reference kernels only
"""
from __future__ import annotations

import os

from core.microkernel.heap import release_freed_memory
from ir import IRError

BACKENDS = ("auto", "onednn", "numpy")
ENV = "MO_CORE_CPU_BACKEND"


def requested_backend(value: str | None = None) -> str:
    source = "backend" if value is not None else ENV
    value = value if value is not None else os.environ.get(ENV, "auto")
    value = value.strip().lower() or "auto"
    if value not in BACKENDS:
        raise IRError(f"{source}={value!r} is not a CPU backend; use one of {', '.join(BACKENDS)}")
    return value


def build_program(plan, threads: int | None = None):
    """The Program that runs `plan` at its current shapes (oneDNN primitives made for
    `threads` OpenMP threads; None: all)."""
    from .program import numpy_program
    if plan.backend == "numpy":
        return numpy_program(plan)
    from .onednn.library import NativeUnavailable
    try:
        from .onednn.compiler import compile_program
        program = compile_program(plan, threads)
        release_freed_memory()  # (what compiling freed: heap.py)
        return program
    except NativeUnavailable as err:
        if plan.backend == "onednn":
            raise IRError(f"the oneDNN CPU backend cannot run here: {err}. Set {ENV}=numpy to use the numpy "
                          "kernels") from None
        message = f"oneDNN is not available ({err}); every layer runs on the numpy kernels"
        if message not in plan.warnings:
            plan.warnings.append(message)
        return numpy_program(plan)
