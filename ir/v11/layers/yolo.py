"""RegionYolo (RegionYolo-1) and ReorgYolo (SpaceToDepth).

ReorgYolo as the catalog (and the CPU daemon) define it, out[n, (dy*s + dx)*C + c,
y, x] = in[n, c, y*s + dy, x*s + dx], is SpaceToDepth with blocks first; OpenVINO's
own ReorgYolo follows Darknet's reorg, a different channel order.
"""
from __future__ import annotations

from .base import Mapping, maps


@maps("RegionYolo")
def region_yolo(m: Mapping):
    a = m.attrs
    x = m.inputs[0]
    attrs = {"coords": a.int("coords", 4), "classes": a.int("classes"), "num": a.int("num"),
             "do_softmax": a.bool("do_softmax", True), "mask": a.ints("mask", None) or [],
             "axis": a.int("axis", 1), "end_axis": a.int("end_axis", -1), "anchors": a.floats("anchors", None) or []}
    return [m.op("RegionYolo", [x], m.out_dims(), attrs=attrs)]


@maps("ReorgYolo")
def reorg_yolo(m: Mapping):
    stride = m.attrs.int("stride")
    if stride <= 0:
        raise m.attrs.error(f"stride {stride} must be positive")
    return [m.op("SpaceToDepth", [m.inputs[0]], m.out_dims(), attrs={"mode": "blocks_first", "block_size": stride})]
