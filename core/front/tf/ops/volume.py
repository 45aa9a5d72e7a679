"""Volumes (video, medical scans): Conv3D, Conv3DBackpropInputV2 (conv3d_transpose), MaxPool3D, AvgPool3D on NDHWC
tensors.

The IR's 3-D Convolution and Pooling read NCDHW (the Model Optimizer's layout for them), while a 5-D tensor
keeps TensorFlow's order in our IR (only 4-D tensors are NCHW: core/front/tf/lowering.py), so each layer gets a
Permute to NCDHW before it and one back after it; between two such layers the pair meets across the
element-wise layers and cancels (core/middle/move_fold.py), as it does against the model's 5-D inputs and
outputs, which are NCDHW (lowering.py); a bias or batch normalization after the convolution folds into it.
Padding: SAME / VALID by TensorFlow's rules (conv.py); the average of a SAME window counts the values inside
the volume only (exclude-pad), as TensorFlow's does; a zero Pad before (Keras' ZeroPadding3D) folds in
(core/front/tf/patterns.py), its zeros then counted.
Weights: Conv3D's DHWIO -> (O, I, D, H, W); a filter with fewer input channels than the input is grouped;
the transposed one's DHW[out][in] -> Caffe's deconvolution (in, out, D, H, W), its padding as conv.py finds it.
"""
from __future__ import annotations

import numpy as np

from core.errors import Error, ShapeError
from core.front.tf.lowering import TO_NCDHW, TO_NDHWC
from core.front.tf.ops.base import TFOp, expect_inputs
from core.front.tf.ops.conv import constant_filter, read_conv_attrs, read_window_attrs, transposed_shape, window_pads
from core.front.tf.tensors import describe
from core.ops.convolution import Convolution, Deconvolution
from core.ops.pad import Pad
from core.ops.pooling import Pooling
from core.ops.shape_ops import Permute

LAYOUT = "NDHWC"


def _same_or_valid(node):
    if node.tf["padding"] not in ("SAME", "VALID"):
        raise Error("{}: padding '{}' is not one of SAME, VALID.", describe(node), node.tf["padding"], faq=43)


def _volume(node, x):
    if len(x) != 5:
        raise ShapeError("{}: the input {} must be 5-D (NDHWC).", describe(node), list(x))


def _channels_first(node, lw, op_class, attrs: dict, x=None):
    """The node as an NCDHW layer (reading `x`, else its first input) between a Permute from and one back to
    NDHWC."""
    x = node.data_inputs()[0] if x is None else x
    lw.keep_inputs(node, x)
    lw.retype(node, op_class, attrs)
    lw.insert_before(node, 0, node.name + "/to_ncdhw", Permute, {"order": list(TO_NCDHW)})
    lw.insert_after(node, node.name + "/ncdhw", Permute, {"order": list(TO_NDHWC)})


class Conv3D(TFOp):
    tf_types = ("Conv3D",)

    @staticmethod
    def extract(node):
        read_conv_attrs(node, 2, LAYOUT)
        _same_or_valid(node)

    @staticmethod
    def shape(node, shapes):
        x, f = shapes
        _volume(node, x)
        if len(f) != 5 or x[4] % f[3] or f[4] % (x[4] // f[3]):
            raise ShapeError("{}: the filter {} does not fit the input {} (DHWIO, NDHWC).", describe(node), list(f),
                             list(x))
        out, begin, end = window_pads(node, x[1:4], f[:3], node.tf["strides"], node.tf["dilation"])
        node.tf["pad_begin"], node.tf["pad_end"] = begin, end
        return [[x[0], *out, f[4]]]

    @staticmethod
    def lower(node, lw):
        x, f = node.data_inputs()
        w = constant_filter(node, f, lw)
        cin, cout = w.shape[3], w.shape[4]
        _channels_first(node, lw, Convolution, {
            "kernel": np.array(w.shape[:3], np.int64), "stride": node.tf["strides"],
            "dilation": node.tf["dilation"], "pad": node.tf["pad_begin"], "pad_end": node.tf["pad_end"],
            "group": int(lw.tf_shape(x)[4]) // cin, "output": int(cout)})
        lw.add_blob(node, "weights", w.transpose(4, 3, 0, 1, 2))


class Pool3D(TFOp):
    tf_types = ("MaxPool3D", "AvgPool3D")

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)
        read_window_attrs(node, "ksize", layout=LAYOUT)
        _same_or_valid(node)

    @staticmethod
    def shape(node, shapes):
        x = shapes[0]
        _volume(node, x)
        out, begin, end = window_pads(node, x[1:4], node.tf["kernel"], node.tf["strides"], 1)
        node.tf["pad_begin"], node.tf["pad_end"] = begin, end
        return [[x[0], *out, x[4]]]

    @staticmethod
    def lower(node, lw):
        _channels_first(node, lw, Pooling, {
            "kernel": np.asarray(node.tf["kernel"], np.int64), "stride": np.asarray(node.tf["strides"], np.int64),
            "pad": node.tf["pad_begin"], "pad_end": node.tf["pad_end"], "rounding_type": "floor",
            "pool-method": "avg" if node.tf_op == "AvgPool3D" else "max",
            "exclude-pad": not node.tf.get("padded_zeros")})


class Conv3DBackpropInputV2(TFOp):
    """tf.nn.conv3d_transpose: inputs (output shape, filter, data)."""
    tf_types = ("Conv3DBackpropInputV2",)

    @staticmethod
    def extract(node):
        read_conv_attrs(node, 3, LAYOUT)
        _same_or_valid(node)

    @staticmethod
    def shape(node, shapes):
        _volume(node, shapes[2])
        return transposed_shape(node, shapes)

    @staticmethod
    def lower(node, lw):
        _, f, x = node.data_inputs()
        w = constant_filter(node, f, lw)
        # values the kernels do not reach (Keras' output_padding) are zeros: a Pad after the layer (conv.py)
        extra = np.maximum(-np.asarray(node.tf["pad_end"], dtype=np.int64), 0)
        _channels_first(node, lw, Deconvolution, {
            "kernel": np.array(w.shape[:3], np.int64), "stride": node.tf["strides"],
            "dilation": node.tf["dilation"], "pad": node.tf["pad_begin"],
            "pad_end": np.maximum(node.tf["pad_end"], 0), "group": 1, "output": int(w.shape[3])}, x)
        lw.add_blob(node, "weights", w.transpose(4, 3, 0, 1, 2))
        if extra.any():
            lw.insert_after(node, node.name + "/covered", Pad, {
                "pads_begin": np.zeros(5, np.int64), "pads_end": np.array([0, 0, *extra], np.int64)})
