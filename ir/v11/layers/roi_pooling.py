"""ROIPooling (ROIPooling-2, max and bilinear) and PSROIPooling (PSROIPooling-1, average); the
ROIs input is [R, 5] rows [batch index, x1, y1, x2, y2]."""
from __future__ import annotations

from .base import Mapping, Unmappable, maps


def _rois(m: Mapping):
    rois = m.inputs[1]
    if rois.shape[-1] != 5 and not (len(rois.shape) == 4 and rois.shape[1] == 5):
        raise m.attrs.error(f"ROIs must be [R, 5], got {list(rois.shape)}")
    return m.reshape(rois, (rois.shape[0], 5), "rois")


def _pooling(m: Mapping, type_: str, version: str, mode_attr: str, modes: tuple, attrs: dict):
    a = m.attrs
    if a[mode_attr] not in modes:
        raise Unmappable(f"{mode_attr} {a[mode_attr]} (only {', '.join(modes)} checked against a reference)")
    attrs = {**attrs, "spatial_scale": a["spatial_scale"], mode_attr: a[mode_attr]}
    return [m.op(type_, [m.inputs[0], _rois(m)], m.out_dims(), version=version, attrs=attrs)]


@maps("ROIPooling")
def roi_pooling(m: Mapping):
    a = m.attrs
    # bilinear: the OD API's crop_and_resize (tests/tf/odapi, against TensorFlow)
    return _pooling(m, "ROIPooling", "opset2", "method", ("max", "bilinear"), {"pooled_h": a["pooled_h"], "pooled_w": a["pooled_w"]})


@maps("PSROIPooling")
def psroi_pooling(m: Mapping):
    a = m.attrs
    attrs = {"output_dim": a["output_dim"], "group_size": a["group_size"], "spatial_bins_x": 1, "spatial_bins_y": 1}
    return _pooling(m, "PSROIPooling", "opset1", "mode", ("average",), attrs)
