"""ROIPooling, PSROIPooling and the region proposals (Proposal, SimplerNMS) and
CTCGreedyDecoder on the GPU plugin: data-dependent gathers over a few ROIs and
sorts / NMS / a greedy decode, which a GPU does badly, run by the CPU kernel on the
host between the device layers (as DetectionOutput is) - the network stays in one
plan instead of splitting over HETERO at each of them."""
from __future__ import annotations

from .base import GpuKernel, register


@register("ROIPooling", "PSROIPooling", "Proposal", "SimplerNMS", "CTCGreedyDecoder")
class HostComputed(GpuKernel):
    host = True
