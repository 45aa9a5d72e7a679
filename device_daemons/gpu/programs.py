"""Building OpenCL programs once: a process-wide cache keyed by (device, source,
options), and build errors that show the compiler's log.

Every built-in kernel file is compiled with the shared header common.cl in front
of it (prepended, not #included, so that the caches key on the whole text) and
`-DMO_HALF` when tensors are stored as half. PoCL additionally keeps compiled
programs on disk (POCL_CACHE_DIR, see device.py), so a new process only pays the
(fast) cache lookup.
"""
from __future__ import annotations

import functools
import os
import warnings

import pyopencl as cl

from ir import IRError

KERNEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")


class BuildError(IRError):
    """An OpenCL program did not compile; the message carries the build log, whose
    lines are kept (a one-line log is useless)."""

    kind = "kernel"  # the daemons' error kind: a kernel (a user's .cl) is at fault

    def __str__(self) -> str:
        return self.message if not self.where else f"{self.where}: {self.message}"


@functools.lru_cache(maxsize=None)
def kernel_source(filename: str) -> str:
    """common.cl + the built-in kernel file `filename` (in kernels/)."""
    with open(os.path.join(KERNEL_DIR, "common.cl")) as f:
        common = f.read()
    with open(os.path.join(KERNEL_DIR, filename)) as f:
        body = f.read()
    return f'{common}\n#line 1 "{filename}"\n{body}'


def _build_log(program, device) -> str:
    try:
        log = program.get_build_info(device, cl.program_build_info.LOG)
    except cl.Error:
        return ""
    return (log or "").strip()


def build(device, source: str, options: tuple = (), what: str = "") -> cl.Program:
    """The built program for `source` on `device` (cached for the process).
    `what` names the source in errors (a file, a custom layer)."""
    key = (source, tuple(options))
    with device._lock:
        program = device._programs.get(key)
    if program is not None:
        return program
    program = cl.Program(device.context, source)
    try:
        with warnings.catch_warnings():  # pyopencl's "non-empty compiler output": warnings are not errors
            warnings.simplefilter("ignore")
            program.build(options=list(options), devices=[device.cl_device])
    except cl.Error as exc:
        log = _build_log(program, device.cl_device) or str(exc)
        raise BuildError(f"the OpenCL program {what or '(built-in)'} does not compile on {device.full_name} "
                         f"(options: {' '.join(options) or 'none'}). Build log:\n{log}") from None
    with device._lock:
        device._programs.setdefault(key, program)
        return device._programs[key]


def builtin_program(device, filename: str, half: bool, defines: tuple = ()) -> cl.Program:
    """`defines`: more -D options (the tile sizes of a tuned kernel variant)."""
    options = (("-DMO_HALF",) if half else ()) + tuple(defines)
    return build(device, kernel_source(filename), options, filename)
