"""Const layers on the GPU plugin: the blob, computed by the CPU kernel on the host
once and kept on the device (the priors of an OD API SSD's DetectionOutput)."""
from __future__ import annotations

from .base import GpuKernel, register


@register("Const")
class Const(GpuKernel):
    constant = True
