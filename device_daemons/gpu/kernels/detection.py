"""SSD heads on the GPU plugin: PriorBox and PriorBoxClustered depend on the
input shapes only, so they are computed on the host once per shape (by the CPU
kernel) and kept on the device as constants; DetectionOutput (a data-dependent
sort and NMS, which a GPU does badly) runs the CPU kernel on the host between
the device layers before and after it."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...native_build import NativeUnavailable
from .base import GpuKernel, register


@register("PriorBox", "PriorBoxClustered")
class PriorBox(GpuKernel):
    constant = True


@register("DetectionOutput")
class DetectionOutput(GpuKernel):
    """Its selection and NMS in C (the CPU kernel's native variant, built once per
    machine) wherever a C compiler is found, whatever the CPU daemon's backend:
    19 ms of the SSD-style net's 22 ms on the H200 were this step in numpy."""
    host = True
    backend = "host"

    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        self.native_unavailable = ""  # why the selection is numpy's (a benchmark prints it)
        try:
            self.backend = "host " + (self.ref.accelerate() or "numpy")
        except NativeUnavailable as err:  # no compiler: numpy's selection (the same result)
            self.native_unavailable = str(err)
            self.backend = "host numpy"

    def host_forward(self, inputs):
        """The CPU kernel, the images of a batch side by side on host threads when
        the machine has MIN_CPUS (the selection of each image is independent and
        the C one releases the GIL, but the numpy around it does not: on 2 busy
        cores threads took 22 ms for the SSD-style net's 8 images, one thread 16),
        their rows then joined as the kernel joins them."""
        n = inputs[0].shape[0]
        if n == 1 or self.ref.keep_top_k <= 0 or _cpus() < MIN_CPUS:
            # (without keep_top_k the batch's rows are cut as a whole)
            return self.ref.forward(inputs)
        prior = inputs[2]
        shards = list(_pool().map(lambda i: self.ref.forward([inputs[0][i:i + 1], inputs[1][i:i + 1], prior])[0],
                                  range(n)))
        out = np.zeros(self.out_shapes[0], np.float32)
        rows = []
        for i, shard in enumerate(shards):
            part = shard[0, 0]
            end = np.flatnonzero(part[:, 0] == -1)
            part = part[:end[0] if end.size else len(part)].copy()
            part[:, 0] = i
            rows.append(part)
        rows = np.concatenate(rows)[:out.shape[2]]
        out[0, 0, :len(rows)] = rows
        if len(rows) < out.shape[2]:
            out[0, 0, len(rows), 0] = -1
        return [out]


MIN_CPUS = 4
_POOL = None
_POOL_LOCK = threading.Lock()


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _pool():
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=min(8, _cpus()), thread_name_prefix="mo-gpu-host")
        return _POOL
