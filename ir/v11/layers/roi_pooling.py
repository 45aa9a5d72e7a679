"""ROIPooling (ROIPooling-2, max) and PSROIPooling (PSROIPooling-1, average); the
ROIs input is [R, 5] rows [batch index, x1, y1, x2, y2]."""
from __future__ import annotations

from .base import Mapping, maps


def _rois(m: Mapping):
    rois = m.inputs[1]
    if rois.shape[-1] != 5 and not (len(rois.shape) == 4 and rois.shape[1] == 5):
        raise m.attrs.error(f"ROIs must be [R, 5], got {list(rois.shape)}")
    return m.reshape(rois, (rois.shape[0], 5), "rois")


@maps("ROIPooling")
def roi_pooling(m: Mapping):
    a = m.attrs
    method = a.choice("method", {"max": "max"}, "max")
    attrs = {"pooled_h": a.int("pooled_h"), "pooled_w": a.int("pooled_w"), "spatial_scale": a.float("spatial_scale"),
             "method": method}
    return [m.op("ROIPooling", [m.inputs[0], _rois(m)], m.out_dims(), version="opset2", attrs=attrs)]


@maps("PSROIPooling")
def psroi_pooling(m: Mapping):
    a = m.attrs
    mode = a.choice("mode", {"average": "average"}, "average")
    attrs = {"output_dim": a.int("output_dim"), "group_size": a.int("group_size"),
             "spatial_scale": a.float("spatial_scale"), "mode": mode, "spatial_bins_x": 1, "spatial_bins_y": 1}
    return [m.op("PSROIPooling", [m.inputs[0], _rois(m)], m.out_dims(), attrs=attrs)]
