"""ROIPooling on the GPU plugin: a data-dependent gather over a few ROIs, run by the
CPU kernel on the host between the device layers (as DetectionOutput is)."""
from __future__ import annotations

from .base import GpuKernel, register


@register("ROIPooling")
class ROIPooling(GpuKernel):
    host = True
