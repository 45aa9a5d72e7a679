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
`unavailable()`. Loaded with ctypes: no cffi needed (the device check's wheels carry none).
"""
from __future__ import annotations

import ctypes
import os
import threading

import numpy as np
import pyopencl as cl

from ...native_build import NativeUnavailable, build_native

ENV = "MO_CORE_GPU_ENQUEUE"
_state: dict = {}
_lock = threading.Lock()


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
    """The C loop and clEnqueueNDRangeKernel's address (ctypes: no cffi needed)."""
    with _lock:
        if "fn" not in _state and "error" not in _state:
            try:
                lib = ctypes.CDLL(build_native(os.path.join(os.path.dirname(os.path.abspath(__file__)), "enqueue.c")))
                loop = lib.mo_enqueue_launches
                loop.restype = ctypes.c_int32
                loop.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64] + [ctypes.c_void_p] * 6
                opencl = ctypes.CDLL(_opencl_library())
                _state.update(loop=loop, fn=ctypes.cast(opencl.clEnqueueNDRangeKernel, ctypes.c_void_p).value,
                              keep=(lib, opencl))
            except (NativeUnavailable, OSError, AttributeError) as err:
                _state["error"] = str(err)
    return _state.get("loop")


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
        self._loop = _state["loop"]
        self._args = (_state["fn"], queue.int_ptr, n) + tuple(
            a.ctypes.data for a in (self.handles, self.dims, self.global_, self.local, self.has_local, self.failed))

    def enqueue(self) -> tuple[int, int]:
        """(0, -1), or (the OpenCL error code, the index of the launch that failed)."""
        status = self._loop(*self._args)
        return (int(status), int(self.failed[0])) if status else (0, -1)
