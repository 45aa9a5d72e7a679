"""Pad, PadV2, MirrorPad and the image resizes ResizeBilinear, ResizeNearestNeighbor.

Pad: our Pad layer, pads mapped to the IR axes (a zero padding just before a
convolution or pooling is folded into it instead: core/front/tf/patterns.py).
Resize: TensorFlow's half-pixel bilinear is the catalog's Resample LINEAR; every
other combination of align_corners / half_pixel_centers, and nearest, is our
Interpolate layer, which follows TensorFlow's coordinate rules exactly.
"""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.ops.base import TFOp, const_input, expect_inputs
from core.front.tf.tensors import attr, describe
from core.ops.interpolate import Interpolate
from core.ops.pad import Pad as IRPad
from core.ops.resize import Resample


def paddings(node, rank):
    pads = const_input(node, 1, "paddings").astype(np.int64)
    if pads.shape != (rank, 2) or pads.min(initial=0) < 0:
        raise ShapeError("{}: paddings {} must be {} pairs of non-negative values.", describe(node), pads.tolist(),
                         rank)
    return pads


class Pad(TFOp):
    tf_types = ("Pad", "PadV2", "MirrorPad")

    @staticmethod
    def extract(node):
        expect_inputs(node, 3 if node.tf_op == "PadV2" else 2)
        mode = "CONSTANT"
        if node.tf_op == "MirrorPad":
            mode = attr(node, "mode", "s")
            if mode not in ("REFLECT", "SYMMETRIC"):
                raise ShapeError("{}: mode '{}' is not REFLECT or SYMMETRIC.", describe(node), mode)
        node.tf["mode"] = mode.lower()

    @staticmethod
    def _value(node):
        return float(const_input(node, 2, "padding value").ravel()[0]) if node.tf_op == "PadV2" else 0.0

    @staticmethod
    def evaluate(node, values):
        x = values[0]
        pads = paddings(node, x.ndim)
        if node.tf["mode"] == "constant":
            return [np.pad(x, pads, mode="constant", constant_values=Pad._value(node))]
        return [np.pad(x, pads, mode=node.tf["mode"])]

    @staticmethod
    def shape(node, shapes):
        pads = paddings(node, len(shapes[0]))
        return [np.asarray(shapes[0], np.int64) + pads.sum(axis=1)]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        pads = paddings(node, lw.rank(x))
        order = [0, 3, 1, 2] if lw.nchw(x) else list(range(lw.rank(x)))
        value = Pad._value(node)
        lw.keep_inputs(node, x)
        lw.retype(node, IRPad, {"pads_begin": [int(pads[a, 0]) for a in order],
                                "pads_end": [int(pads[a, 1]) for a in order], "pad_mode": node.tf["mode"],
                                "pad_value": value})


class Resize(TFOp):
    tf_types = ("ResizeBilinear", "ResizeNearestNeighbor")

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)
        node.tf["align_corners"] = attr(node, "align_corners", "b", False)
        node.tf["half_pixel_centers"] = attr(node, "half_pixel_centers", "b", False)

    @staticmethod
    def shape(node, shapes):
        x = shapes[0]
        size = const_input(node, 1, "size").astype(np.int64).ravel()
        if len(x) != 4 or len(size) != 2 or size.min() <= 0:
            raise ShapeError("{}: needs a 4-D input and 2 positive sizes, got {} and {}.", describe(node), list(x),
                             list(size))
        return [[x[0], size[0], size[1], x[3]]]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        h, w = (int(d) for d in lw.tf_shape(node.out_node(0))[1:3])
        lw.keep_inputs(node, x)
        linear = node.tf_op == "ResizeBilinear"
        if linear and node.tf["half_pixel_centers"] and not node.tf["align_corners"]:
            in_h, in_w = (int(d) for d in lw.tf_shape(x)[1:3])
            factor = h / in_h if h * in_w == w * in_h else 1.0
            return lw.retype(node, Resample, {"resample_type": "caffe.ResampleParameter.LINEAR", "height": h,
                                              "width": w, "factor": factor})
        lw.retype(node, Interpolate, {"mode": "linear" if linear else "nearest", "height": h, "width": w,
                                      "align_corners": node.tf["align_corners"],
                                      "half_pixel_centers": node.tf["half_pixel_centers"]})
