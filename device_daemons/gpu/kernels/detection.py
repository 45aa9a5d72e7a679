"""SSD heads on the GPU plugin: PriorBox and PriorBoxClustered depend on the
input shapes only, so they are computed on the host once per shape (by the CPU
kernel) and kept on the device as constants; DetectionOutput (a data-dependent
sort and NMS, which a GPU does badly) runs the CPU kernel on the host between
the device layers before and after it."""
from __future__ import annotations

from .base import GpuKernel, register


@register("PriorBox", "PriorBoxClustered")
class PriorBox(GpuKernel):
    constant = True


@register("DetectionOutput")
class DetectionOutput(GpuKernel):
    host = True
