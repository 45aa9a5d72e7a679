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
    attrs = {"coords": a["coords"], "classes": a["classes"], "num": a["num"], "do_softmax": a["do_softmax"],
             "mask": a["mask"] or [], "axis": a["axis"], "end_axis": a["end_axis"], "anchors": a["anchors"] or []}
    return [m.op("RegionYolo", [x], m.out_dims(), attrs=attrs)]


@maps("ReorgYolo")
def reorg_yolo(m: Mapping):
    stride = m.attrs["stride"]
    return [m.op("SpaceToDepth", [m.inputs[0]], m.out_dims(), attrs={"mode": "blocks_first", "block_size": stride})]
