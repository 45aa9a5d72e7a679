"""Resizing -> Interpolate-11 to the port's size: Resample (nearest: floor(dst *
in/out); linear and cubic: half-pixel centres, clamped at the borders), Caffe Interp
(bilinear with aligned corners, after cropping by its non-positive pad_beg/pad_end),
and Interpolate (TensorFlow's resize_bilinear / resize_nearest_neighbor rules:
align_corners, half_pixel_centers or neither; resize_bicubic as two MatMuls by its per-axis weights)."""
from __future__ import annotations

import numpy as np

from ...cubic import cubic_matrix
from .base import Mapping, Unmappable, maps


def _interpolate(m: Mapping, x, out, mode: str, transform: str, suffix=None, nearest_mode="floor"):
    attrs = {"mode": mode, "shape_calculation_mode": "sizes", "coordinate_transformation_mode": transform,
             "nearest_mode": nearest_mode, "antialias": False, "pads_begin": [0] * len(out), "pads_end": [0] * len(out),
             "cube_coeff": -0.75}
    inputs = [x, m.ints(out[2:], "sizes"), m.ints([2, 3], "axes")]
    return m.op("Interpolate", inputs, out, suffix, version="opset11", attrs=attrs)


@maps("Resample")
def resample(m: Mapping):
    a = m.attrs
    kind = a["type"].rsplit(".", 1)[-1]
    x = m.inputs[0]
    out = m.out_dims()
    if len(out) != 4:
        raise a.error(f"needs a 4-D input, got {list(x.shape)}")
    if a["antialias"] and (out[2] < x.shape[2] or out[3] < x.shape[3]):
        raise Unmappable("antialiased downscaling")
    if kind == "NEAREST":
        return [_interpolate(m, x, out, "nearest", "asymmetric")]
    if kind == "LINEAR":
        return [_interpolate(m, x, out, "linear_onnx", "half_pixel")]
    return [_interpolate(m, x, out, "cubic", "half_pixel")]  # Keys' a = -0.75, as OpenCV's INTER_CUBIC


@maps("Interp")
def interp(m: Mapping):
    a = m.attrs
    x = m.inputs[0]
    out = m.out_dims()
    if not a["align_corners"]:
        raise Unmappable("align_corners 0 (Caffe's Interp aligns corners)")
    pad_beg, pad_end = a["pad_beg"], a["pad_end"]
    if pad_beg > 0 or pad_end > 0:
        raise a.error(f"pad_beg {pad_beg} and pad_end {pad_end} must not be positive (Caffe crops with them)")
    n, c, h, w = x.shape
    if pad_beg or pad_end:
        shape = (n, c, h + pad_beg + pad_end, w + pad_beg + pad_end)
        inputs = [x, m.ints([-pad_beg, -pad_beg], "crop/start"), m.ints([h + pad_end, w + pad_end], "crop/stop"),
                  m.ints([1, 1], "crop/step"), m.ints([2, 3], "crop/axes")]
        x = m.op("Slice", inputs, shape, "crop", version="opset8")
    return [_interpolate(m, x, out, "linear_onnx", "align_corners")]


@maps("Interpolate")
def interpolate(m: Mapping):
    a = m.attrs
    x = m.inputs[0]
    out = m.out_dims()
    if a["align_corners"] and a["half_pixel_centers"]:
        raise Unmappable("align_corners together with half_pixel_centers")
    if a["mode"] == "linear":
        transform = "align_corners" if a["align_corners"] else "half_pixel" if a["half_pixel_centers"] else "asymmetric"
        return [_interpolate(m, x, out, "linear_onnx", transform)]
    if a["mode"] == "cubic":  # (TensorFlow's table of weights and its renormalized borders: two MatMuls by them)
        args = (a["align_corners"], a["half_pixel_centers"])
        rows = m.const(cubic_matrix(x.shape[2], out[2], *args), "rows")
        columns = m.const(np.ascontiguousarray(cubic_matrix(x.shape[3], out[3], *args).T), "columns")
        mid = m.op("MatMul", [x, columns], tuple(x.shape[:3]) + (out[3],), "columns_resized",
                   attrs={"transpose_a": False, "transpose_b": False})
        return [m.op("MatMul", [rows, mid], out, attrs={"transpose_a": False, "transpose_b": False})]
    if a["align_corners"]:  # TensorFlow rounds halves away from zero (coordinates are >= 0)
        return [_interpolate(m, x, out, "nearest", "align_corners", nearest_mode="round_prefer_ceil")]
    transform = "tf_half_pixel_for_nn" if a["half_pixel_centers"] else "asymmetric"
    return [_interpolate(m, x, out, "nearest", transform)]
