"""Convolutions: Conv2D, DepthwiseConv2dNative, Conv2DBackpropInput (transposed), and ExtractImagePatches (a
Convolution whose weights pick the window's values).

TensorFlow's padding: VALID none; SAME pads (out - 1) * stride + extent - in in
total, the smaller half first (so an even input with stride 2 is padded at the
bottom/right only: IR pad-b / pad-r); EXPLICIT from `explicit_paddings`.
Weights: Conv2D HWIO -> OIHW (a filter with fewer input channels than the input
is a grouped convolution); depthwise HWCM -> (C*M, 1, kh, kw) with group C;
transposed HW[out][in] -> Caffe's deconvolution (in, out, kh, kw).
"""
from __future__ import annotations

import numpy as np

from core.errors import Error, ShapeError
from core.front.tf.ops.base import TFOp, const_input, expect_inputs
from core.front.tf.tensors import attr, describe
from core.ops.convolution import Convolution, Deconvolution
from core.ops.pad import Pad


def spatial_pair(node, name, default=None, layout="NHWC"):
    """A 4-value NHWC list attribute (strides, dilations, ksize) -> its (h, w); of an NDHWC op, 5 values ->
    (d, h, w)."""
    values = attr(node, name, "list_i", default)
    if len(values) != len(layout):
        raise Error("{}: attribute '{}' has {} values; TensorFlow needs {} ({}).", describe(node), name,
                    len(values), len(layout), ", ".join(layout), faq=43)
    if values[0] != 1 or values[-1] != 1:
        raise Error("{}: {} {} moves along the batch or channel axis, which the IR cannot do.", describe(node), name,
                    values)
    if min(values) <= 0:
        raise Error("{}: {} {} must be positive.", describe(node), name, values)
    return np.array(values[1:-1], dtype=np.int64)


def read_window_attrs(node, kernel_attr=None, layout="NHWC"):
    fmt = attr(node, "data_format", "s", layout)
    if fmt != layout:
        raise Error("{}: data_format {} is not supported; frozen graphs for CPU are {}.", describe(node), fmt, layout)
    node.tf["strides"] = spatial_pair(node, "strides", layout=layout)
    node.tf["padding"] = attr(node, "padding", "s")
    if node.tf["padding"] not in ("SAME", "VALID", "EXPLICIT"):
        raise Error("{}: padding '{}' is not one of SAME, VALID, EXPLICIT.", describe(node), node.tf["padding"],
                    faq=43)
    if node.tf["padding"] == "EXPLICIT":
        pads = attr(node, "explicit_paddings", "list_i")
        if len(pads) != 8 or pads[0] or pads[1] or pads[6] or pads[7]:
            raise Error("{}: explicit_paddings {} must pad H and W only (8 values).", describe(node), pads, faq=43)
        node.tf["explicit"] = (np.array([pads[2], pads[4]], np.int64), np.array([pads[3], pads[5]], np.int64))
    if kernel_attr:
        node.tf["kernel"] = spatial_pair(node, kernel_attr, layout=layout)


def read_conv_attrs(node, inputs: int, layout="NHWC"):
    """A convolution's window attributes (strides, padding, dilations) of its layout."""
    expect_inputs(node, inputs)
    read_window_attrs(node, layout=layout)
    node.tf["dilation"] = spatial_pair(node, "dilations", [1] * len(layout), layout=layout)


def constant_filter(node, f, lw) -> np.ndarray:
    """The convolution's weights: a constant (a filter computed from the model's data offloads)."""
    if f.soft_get("value") is None:
        raise lw.unsupported(node, "its filter is computed from the model's data, not a constant")
    return np.asarray(f.value, dtype=np.float32)


def window_pads(node, size, kernel, stride, dilation):
    """(output size, pad begin, pad end) of H and W (of D, H and W), TensorFlow's rules."""
    size, kernel = np.asarray(size, np.int64), np.asarray(kernel, np.int64)
    extent = dilation * (kernel - 1) + 1
    padding = node.tf["padding"]
    if padding == "SAME":
        out = -(-size // stride)
        total = np.maximum((out - 1) * stride + extent - size, 0)
        begin = total // 2
        return out, begin, total - begin
    if padding == "VALID":
        begin = end = np.zeros(len(size), np.int64)
    else:
        begin, end = node.tf["explicit"]
    out = (size + begin + end - extent) // stride + 1
    if np.any(out <= 0):
        raise ShapeError("{}: input {} is smaller than the window {}.", describe(node), list(size), list(extent))
    return out, begin, end


class Conv2D(TFOp):
    tf_types = ("Conv2D", "DepthwiseConv2dNative")

    @staticmethod
    def extract(node):
        read_conv_attrs(node, 2)

    @staticmethod
    def shape(node, shapes):
        x, f = shapes
        if len(x) != 4 or len(f) != 4:
            raise ShapeError("{}: input {} and filter {} must be 4-D (NHWC and HWIO).", describe(node), list(x),
                             list(f))
        depthwise = node.tf_op == "DepthwiseConv2dNative"
        if depthwise and f[2] != x[3] or not depthwise and x[3] % f[2]:
            raise ShapeError("{}: the filter {} does not fit the input's {} channels.", describe(node), list(f), x[3])
        out, begin, end = window_pads(node, x[1:3], f[:2], node.tf["strides"], node.tf["dilation"])
        node.tf["pad_begin"], node.tf["pad_end"] = begin, end
        channels = f[2] * f[3] if depthwise else f[3]
        return [[x[0], out[0], out[1], channels]]

    @staticmethod
    def lower(node, lw):
        x, f = node.data_inputs()
        w = constant_filter(node, f, lw)
        kh, kw, cin, cout = w.shape
        channels = int(lw.tf_shape(x)[3])
        if node.tf_op == "DepthwiseConv2dNative":
            weights = w.transpose(2, 3, 0, 1).reshape(cin * cout, 1, kh, kw)
            group, output = cin, cin * cout
        else:
            weights = w.transpose(3, 2, 0, 1)
            group, output = channels // cin, cout
        lw.keep_inputs(node, x)
        lw.retype(node, Convolution, {
            "kernel": np.array([kh, kw], np.int64), "stride": node.tf["strides"], "dilation": node.tf["dilation"],
            "pad": node.tf["pad_begin"], "pad_end": node.tf["pad_end"], "group": int(group), "output": int(output)})
        lw.add_blob(node, "weights", weights)


def transposed_shape(node, shapes):
    """A transposed convolution's output shape (inputs: output shape, filter, data) and its pads (node.tf
    pad_begin / pad_end; a negative end: output_padding, rows the kernels do not cover): those of the forward
    convolution from its output back to its input with the filter (spatial axes first, then out, in)."""
    sizes = const_input(node, 0, "output shape").astype(np.int64).ravel()
    f, x = shapes[1], shapes[2]
    if not len(sizes) == len(f) == len(x) or f[-1] != x[-1]:
        raise ShapeError("{}: output shape {}, filter {} and input {} do not fit a transposed convolution.",
                         describe(node), list(sizes), list(f), list(x))
    axes = slice(1, len(x) - 1)
    stride, dilation, kernel = node.tf["strides"], node.tf["dilation"], np.asarray(f[:len(x) - 2], np.int64)
    fwd, begin, _ = window_pads(node, sizes[axes], kernel, stride, dilation)
    if not np.array_equal(fwd, x[axes]):
        raise ShapeError("{}: an output of {} does not come from an input of {} with this filter and stride.",
                         describe(node), list(sizes), list(x))
    extent = dilation * (kernel - 1) + 1
    node.tf["pad_begin"] = begin
    node.tf["pad_end"] = stride * (np.asarray(x[axes], np.int64) - 1) + extent - begin - sizes[axes]
    return [[x[0], *sizes[axes], f[-2]]]


class Conv2DBackpropInput(TFOp):
    """tf.nn.conv2d_transpose: inputs (output shape, filter, data)."""
    tf_types = ("Conv2DBackpropInput",)

    @staticmethod
    def extract(node):
        read_conv_attrs(node, 3)

    @staticmethod
    def shape(node, shapes):
        if len(shapes[2]) != 4:
            raise ShapeError("{}: the input {} must be 4-D (NHWC).", describe(node), list(shapes[2]))
        return transposed_shape(node, shapes)

    @staticmethod
    def lower(node, lw):
        _, f, x = node.data_inputs()
        w = constant_filter(node, f, lw)
        kh, kw, cout, _ = w.shape
        # an output larger than the kernels cover (Keras' output_padding): the last rows and columns
        # get nothing, zeros - a Pad after the Deconvolution (the bias, a BiasAdd of its own, comes after)
        extra = np.maximum(-np.asarray(node.tf["pad_end"], dtype=np.int64), 0)
        out = node.out_node(0)
        lw.keep_inputs(node, x)
        lw.retype(node, Deconvolution, {
            "kernel": np.array([kh, kw], np.int64), "stride": node.tf["strides"], "dilation": node.tf["dilation"],
            "pad": node.tf["pad_begin"], "pad_end": np.maximum(node.tf["pad_end"], 0), "group": 1,
            "output": int(cout)})
        lw.add_blob(node, "weights", w.transpose(3, 2, 0, 1))
        if extra.any():
            pad = lw.insert_after(node, node.name + "/covered", Pad, {
                "pads_begin": np.zeros(4, np.int64), "pads_end": np.array([0, 0, extra[0], extra[1]], np.int64)})
            covered = pad.in_node(0)  # the Deconvolution's output: TensorFlow's shape less the uncovered part
            covered["tf_shape"] = np.asarray(out["tf_shape"], np.int64) - np.array([0, extra[0], extra[1], 0])


class ExtractImagePatches(TFOp):
    """tf.image.extract_patches (a ViT's patchify): each window's kh x kw x C values, row by row, as the output's
    channels - a Convolution whose weights pick one input value each (kh * kw * C outputs: copies, exact in f32)."""
    tf_types = ("ExtractImagePatches",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)
        read_window_attrs(node, "ksizes")
        node.tf["dilation"] = spatial_pair(node, "rates", [1, 1, 1, 1])
        if node.tf["padding"] == "EXPLICIT":
            raise Error("{}: padding EXPLICIT is not one of SAME, VALID.", describe(node), faq=43)

    @staticmethod
    def shape(node, shapes):
        (x,) = shapes
        if len(x) != 4:
            raise ShapeError("{}: the images {} must be 4-D (NHWC).", describe(node), list(x))
        kernel = node.tf["kernel"]
        out, begin, end = window_pads(node, x[1:3], kernel, node.tf["strides"], node.tf["dilation"])
        node.tf["pad_begin"], node.tf["pad_end"] = begin, end
        return [[x[0], out[0], out[1], int(kernel[0] * kernel[1]) * int(x[3])]]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        (kh, kw), channels = (int(k) for k in node.tf["kernel"]), int(lw.tf_shape(x)[3])
        weights = np.zeros((kh * kw * channels, channels, kh, kw), np.float32)
        for i in range(kh):
            for j in range(kw):
                weights[(i * kw + j) * channels + np.arange(channels), np.arange(channels), i, j] = 1.0
        lw.keep_inputs(node, x)
        lw.retype(node, Convolution, {
            "kernel": np.array([kh, kw], np.int64), "stride": node.tf["strides"], "dilation": node.tf["dilation"],
            "pad": node.tf["pad_begin"], "pad_end": node.tf["pad_end"], "group": 1, "output": kh * kw * channels})
        lw.add_blob(node, "weights", weights)
