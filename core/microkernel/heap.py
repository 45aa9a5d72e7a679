"""The heap of a process that handles tensors request after request (a CPU daemon's
plans, the serving front end): freed buffers kept for the next request.

glibc serves large allocations with fresh pages - mmap'd, or heap memory it trimmed
back to the kernel when the last buffer was freed - so without this every request
page-faults its buffers in again and the kernel zero-fills each page: thousands of
faults a call for a plan's numpy arrays, and 0.5-0.7 ms a request in the front end
for a GoogLeNet image's 600 KB buffers (its body, the input array, the response;
`perf`, REST binary on 2 vCPUs: 2.3 -> 1.7 ms outside the daemon call, most of it the
event loop receiving the body). With a fixed mmap threshold above the largest such
buffer and a high trim threshold, freed buffers stay and are reused; what stays is
bounded by the peak of the buffers live at once. Process-wide and idempotent; where
the C library is not glibc (musl, macOS) allocation stays as it is. release_freed_memory
gives what a one-off step freed back at once (a CPU plan's compile)."""
from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit): larger buffers are mmap'd each time
TRIM_THRESHOLD = 1 << 30  # freed memory at the heap's top kept up to this
_done: list[bool] = []  # (once per process: [the outcome])


def keep_freed_buffers() -> bool:
    """Set the thresholds (module doc); False where the C library has no mallopt."""
    if not _done:
        _done.append(_set())
    return _done[0]


def release_freed_memory() -> None:
    """Gives the heap's free pages back to the system now (glibc malloc_trim(0)): what a
    one-off step frees - making oneDNN primitives (trial and spent descriptors, the
    weights' reorders) - would otherwise stay resident for good under keep_freed_buffers.
    A no-op where the C library has no malloc_trim."""
    trim = _libc_function("malloc_trim")
    if trim is not None:
        trim(0)


def _libc_function(name: str):
    try:  # (the process's own symbols: find_library would run ldconfig, a process a sandbox may forbid)
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None


def _set() -> bool:
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
