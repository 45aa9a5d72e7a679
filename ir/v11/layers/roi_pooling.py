"""ROIPooling (ROIPooling-2, max) and PSROIPooling (PSROIPooling-1, average); the
ROIs input is [R, 5] rows [batch index, x1, y1, x2, y2]."""
from __future__ import annotations

from .base import Mapping, Unmappable, maps


def _rois(m: Mapping):
    rois = m.inputs[1]
    if rois.shape[-1] != 5 and not (len(rois.shape) == 4 and rois.shape[1] == 5):
        raise m.attrs.error(f"ROIs must be [R, 5], got {list(rois.shape)}")
    return m.reshape(rois, (rois.shape[0], 5), "rois")


@maps("ROIPooling")
def roi_pooling(m: Mapping):
    a = m.attrs
    if a["method"] != "max":
        raise Unmappable(f"method {a['method']} (only max is checked against a reference)")
    attrs = {"pooled_h": a["pooled_h"], "pooled_w": a["pooled_w"], "spatial_scale": a["spatial_scale"],
             "method": "max"}
    return [m.op("ROIPooling", [m.inputs[0], _rois(m)], m.out_dims(), version="opset2", attrs=attrs)]


@maps("PSROIPooling")
def psroi_pooling(m: Mapping):
    a = m.attrs
    if a["mode"] != "average":
        raise Unmappable(f"mode {a['mode']} (only average is checked against a reference)")
    attrs = {"output_dim": a["output_dim"], "group_size": a["group_size"], "spatial_scale": a["spatial_scale"],
             "mode": "average", "spatial_bins_x": 1, "spatial_bins_y": 1}
    return [m.op("PSROIPooling", [m.inputs[0], _rois(m)], m.out_dims(), attrs=attrs)]
