"""Pad, PadV2, MirrorPad, the image resizes ResizeBilinear, ResizeNearestNeighbor, ResizeBicubic and CropAndResize.

Pad: our Pad layer, pads mapped to the IR axes (a zero padding just before a
convolution or pooling is folded into it instead: core/front/tf/patterns.py).
Resize: TensorFlow's half-pixel bilinear is the catalog's Resample LINEAR; every
other combination of align_corners / half_pixel_centers, nearest and bicubic is our
Interpolate layer, which follows TensorFlow's coordinate rules (and bicubic weights) exactly. CropAndResize: ROIPooling
method=bilinear (TensorFlow's crop_and_resize exactly, zeros outside the image).
"""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.lowering import apply_op, reshaped
from core.front.tf.ops.base import TFOp, const_input, expect_inputs
from core.front.tf.tensors import attr, describe
from core.ops.interpolate import Interpolate
from core.ops.pad import Pad as IRPad
from core.ops.resize import Resample
from core.ops.roi_pooling import ROIPooling
from core.ops.shape_ops import Concat
from core.ops.slicing import CropRange


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
    tf_types = ("ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic")

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
        mode = {"ResizeBilinear": "linear", "ResizeBicubic": "cubic"}.get(node.tf_op, "nearest")
        lw.retype(node, Interpolate, {"mode": mode, "height": h, "width": w,
                                      "align_corners": node.tf["align_corners"],
                                      "half_pixel_centers": node.tf["half_pixel_centers"]})


class CropAndResize(TFOp):
    """tf.image.crop_and_resize (bilinear, extrapolation_value 0; boxes and box indices constants or the model's
    data): the ROIPooling method=bilinear the OD API's Faster R-CNN has (its spatial_scale 1: normalized boxes),
    its ROIs [box index, x1, y1, x2, y2] a Concat of the index and the boxes' columns in that order."""
    tf_types = ("CropAndResize",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 4)
        node.tf["method"] = attr(node, "method", "s", "bilinear")
        node.tf["extrapolation_value"] = attr(node, "extrapolation_value", "f", 0.0)

    @staticmethod
    def shape(node, shapes):
        image, boxes, index = shapes[:3]
        size = const_input(node, 3, "crop_size").astype(np.int64).ravel()
        if len(image) != 4 or len(boxes) != 2 or boxes[1] != 4 or list(index) != [boxes[0]] or len(size) != 2 \
                or size.min() <= 0:
            raise ShapeError("{}: needs a 4-D image, boxes [N, 4], N box indices and 2 positive crop sizes; got {}, "
                             "{}, {} and {}.", describe(node), list(image), list(boxes), list(index), list(size))
        return [[boxes[0], size[0], size[1], image[3]]]

    @staticmethod
    def lower(node, lw):
        image, boxes, index = node.data_inputs()[:3]
        if node.tf["method"] != "bilinear" or node.tf["extrapolation_value"] != 0.0:
            raise lw.unsupported(node, "crop_and_resize with method '{}' and extrapolation_value {} (bilinear with "
                                       "0 is converted)".format(node.tf["method"], node.tf["extrapolation_value"]))
        h, w = (int(d) for d in lw.tf_shape(node.out_node(0))[1:3])
        count = int(lw.tf_shape(boxes)[0])
        rois = []
        if index.soft_get("value") is not None:
            rois.append(_const_column(lw, node.name + "/rois/index", index.value))
        else:
            rois.append(reshaped(lw, index, [count, 1], False, node.name + "/rois/index"))
        for column in (1, 0, 3, 2):  # TensorFlow's y1, x1, y2, x2 -> x1, y1, x2, y2
            if boxes.soft_get("value") is not None:
                rois.append(_const_column(lw, "{}/rois/{}".format(node.name, column), boxes.value[:, column]))
            else:
                rois.append(apply_op(lw, boxes, "{}/rois/{}".format(node.name, column), CropRange, {
                    "axis": [1], "crop_begin": [column], "crop_end": [3 - column]}, tf_shape=[count, 1]))
        joined = lw.new_op(node.name + "/rois", Concat, {"axis": 1})
        for port, part in enumerate(rois):
            lw.graph.connect(part, joined, inp=port)
        lw.keep_inputs(node, image, lw.tensor_of(joined, node.name + "/rois", [count, 5]))
        lw.retype(node, ROIPooling, {"pooled_h": h, "pooled_w": w, "spatial_scale": 1.0, "method": "bilinear"})


def _const_column(lw, name: str, values):
    const = lw.graph.add_const(name, np.asarray(values, np.float32).reshape(-1, 1))
    const["tf_shape"], const["nchw"] = np.array(const.value.shape, np.int64), False
    return const
