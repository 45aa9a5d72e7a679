"""Convolution -> Convolution / GroupConvolution (+ Add of the biases);
Deconvolution -> ConvolutionBackpropData / GroupConvolutionBackpropData (+ Add).

IR v2 weights: Convolution (O, I/g, kh, kw), Deconvolution Caffe's (I, O/g, kh, kw); a 3-D window's
(volumes) with kd before kh, the same below.
OpenVINO's layouts: Convolution [O, I, kh, kw], GroupConvolution [g, O/g, I/g, kh, kw],
ConvolutionBackpropData [I, O, kh, kw], GroupConvolutionBackpropData
[g, I/g, O/g, kh, kw]: each is a reshape of ours, no transposition.
"""
from __future__ import annotations

import numpy as np

from .base import Mapping, channel_shape, maps


def _window_attrs(m: Mapping):
    a = m.attrs
    attrs = {"strides": a["stride"], "dilations": a["dilation"], "pads_begin": a["pad"], "pads_end": a["pad_end"],
             "auto_pad": "explicit"}
    return a["kernel"], attrs


def _with_biases(m: Mapping, type_: str, weights, attrs, out) -> list:
    biases = m.attrs.blob("biases", required=False, size=out[1])
    y = m.op(type_, [m.inputs[0], weights], out, None if biases is None else "WithoutBiases", attrs=attrs)
    if biases is not None:
        bias = m.const(biases.reshape(channel_shape(len(out), out[1])), "biases")
        y = m.op("Add", [y, bias], out, attrs={"auto_broadcast": "numpy"})
    return [y]


def _convolution(m: Mapping, transposed: bool):
    kernel, attrs = _window_attrs(m)
    out = m.out_dims()
    c, o, group = m.in_dims()[1], out[1], m.attrs["group"]
    if c % group or o % group:
        raise m.attrs.error(f"{c} input channels and {o} outputs cannot be split into {group} groups")
    if transposed:
        attrs["output_padding"] = [0] * len(kernel)
        types = ("ConvolutionBackpropData", "GroupConvolutionBackpropData")
        shape, grouped = (c, o, *kernel), (group, c // group, o // group, *kernel)
    else:
        types = ("Convolution", "GroupConvolution")
        shape, grouped = (o, c, *kernel), (group, o // group, c // group, *kernel)
    w = m.attrs.blob("weights", size=int(np.prod(grouped)))
    if group == 1:
        return _with_biases(m, types[0], m.const(w.reshape(shape), "weights"), attrs, out)
    return _with_biases(m, types[1], m.const(w.reshape(grouped), "weights"), attrs, out)


@maps("Convolution")
def convolution(m: Mapping):
    return _convolution(m, transposed=False)


@maps("Deconvolution")
def deconvolution(m: Mapping):
    return _convolution(m, transposed=True)
