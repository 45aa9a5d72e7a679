"""The serving processes' heap: freed request-sized buffers kept for the next request.

Every request allocates buffers of its tensors' size (the body, the input array, the
response): a GoogLeNet image is 600 KB. glibc serves such sizes with fresh pages -
mmap'd, or heap memory it trimmed back to the kernel when the buffer was freed - so
every request page-faults them in again and the kernel zeroes each page: 0.5-0.7 ms
a request of the front end's, most of it on the event loop receiving the body
(measured with `perf`, GoogLeNet b1 over REST binary on 2 vCPUs: 2.3 -> 1.7 ms outside
the daemon call). With a fixed mmap threshold above the largest request
buffer and a trim threshold well above that, freed buffers stay in the process and
the next request reuses them. What stays is bounded by the peak of concurrent
requests' buffers, which the body size limit bounds."""
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit): larger buffers are mmap'd each time
TRIM_THRESHOLD = 256 << 20  # freed memory at the heap's top kept up to this


def keep_freed_buffers() -> bool:
    """Set the thresholds (module doc); False where the C library is not glibc (musl,
    macOS), which then allocates as it does."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
