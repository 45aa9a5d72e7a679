"""Enqueueing a request's device launches in one C call (enqueue.c).

pyopencl's enqueue_nd_range_kernel makes an event object for every launch and
costs a Python call; on the H200 a launch cost 9 us of host time that way, and
GoogLeNet's ~140 launches 1.3 ms a request, as much as the device needs once its
kernels are fast. Here the launches of a run of device steps are enqueued by a C
loop with no event. The function is the ICD loader's clEnqueueNDRangeKernel,
taken from the libOpenCL this process already loaded for pyopencl (an ICD
loader dispatches on the queue's own driver).

MO_CORE_GPU_ENQUEUE=python keeps pyopencl's enqueue (the comparison in the
device check); a missing compiler or loader does too, with the reason in
`unavailable()`.
"""
from __future__ import annotations

import ctypes
import os

import numpy as np
import pyopencl as cl

from ...cpu.native.build import load_native
from ...cpu.onednn.library import NativeUnavailable

ENV = "MO_CORE_GPU_ENQUEUE"
CDEF = """
int32_t mo_enqueue_launches(void *enqueue, void *queue, int64_t count, void *const *kernels, const uint32_t *dims,
                            const size_t *global, const size_t *local, const uint8_t *has_local, int64_t *failed);
"""
_state: dict = {}


def _opencl_library() -> str:
    """The path of the libOpenCL this process loaded (pyopencl's)."""
    cl.get_platforms()  # (loaded and initialized)
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if line.strip() else ""
            if "libOpenCL" in os.path.basename(path) and os.path.isfile(path):
                return path
    raise NativeUnavailable("no libOpenCL is mapped into this process")


def _load():
    if "lib" not in _state and "error" not in _state:
        try:
            ffi, lib = load_native("enqueue", CDEF, os.path.dirname(os.path.abspath(__file__)))
            opencl = ctypes.CDLL(_opencl_library())
            address = ctypes.cast(opencl.clEnqueueNDRangeKernel, ctypes.c_void_p).value
            _state.update(lib=lib, ffi=ffi, fn=ffi.cast("void *", address), keep=opencl)
        except (NativeUnavailable, OSError, AttributeError) as err:
            _state["error"] = str(err)
    return _state.get("lib")


def unavailable() -> str:
    """Why launches go through pyopencl ("" when the C loop is used)."""
    if os.environ.get(ENV, "").strip().lower() == "python":
        return f"{ENV}=python"
    _load()
    return _state.get("error", "")


class LaunchList:
    """Consecutive launches of one queue (pyopencl Kernel objects with their
    arguments set, global and local sizes), enqueued by one C call."""

    def __init__(self, queue, launches):
        """launches: [(kernel, global_size, local_size or None)]."""
        self.queue = queue
        self.kernels = [k for k, _, _ in launches]  # (kept alive: the C side holds their handles)
        n = len(launches)
        self.handles = np.array([k.int_ptr for k in self.kernels], np.uintp)
        self.dims = np.array([len(g) for _, g, _ in launches], np.uint32)
        self.global_ = np.ones((n, 3), np.uintp)
        self.local = np.ones((n, 3), np.uintp)
        self.has_local = np.array([loc is not None for _, _, loc in launches], np.uint8)
        for i, (_, g, loc) in enumerate(launches):
            self.global_[i, :len(g)] = g
            if loc is not None:
                self.local[i, :len(loc)] = loc
        self.failed = np.zeros(1, np.int64)
        ffi = _state["ffi"]
        self._args = (_state["fn"], ffi.cast("void *", queue.int_ptr), n,
                      ffi.from_buffer("void *[]", self.handles), ffi.from_buffer("uint32_t[]", self.dims),
                      ffi.from_buffer("size_t[]", self.global_), ffi.from_buffer("size_t[]", self.local),
                      ffi.from_buffer("uint8_t[]", self.has_local),
                      ffi.from_buffer("int64_t[]", self.failed, require_writable=True))

    def enqueue(self) -> tuple[int, int]:
        """(0, -1), or (the OpenCL error code, the index of the launch that failed)."""
        status = _state["lib"].mo_enqueue_launches(*self._args)
        return (int(status), int(self.failed[0])) if status else (0, -1)
