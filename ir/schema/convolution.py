"""Convolution and Deconvolution (catalog: "Convolution Layer", "Deconvolution Layer").

IR v2 writes each 2-D parameter as `-x`/`-y` pairs plus the 4-D `stride` list;
later IR versions use `kernel`, `strides`, `pads_begin`, `pads_end`, `dilations`
lists, which readers accept too, and which 3-D layers (NCDHW volumes) are written as.
The end padding (`pad-r`/`pad-b`) defaults to the start padding (Caffe pads
symmetrically).
"""
from .attribute import YX, Int, Same
from .layer import LayerSchema


def window_attrs():
    """kernel, pad, pad_end, stride: shared by Convolution, Deconvolution and Pooling."""
    return {
        "kernel": YX("kernel", lists=("kernel", "kernel_size"), nd="kernel", min=1),
        "pad": YX("pad", (0, 0), lists=("pad", "pads_begin"), nd="pads_begin", min=0),
        "pad_end": YX("pad_end", Same("pad"), x="pad-r", y="pad-b", lists=("pads_end",), nd="pads_end", min=0),
        "stride": YX("stride", (1, 1), lists=("stride", "strides"), write_list="stride", nd="strides", min=1),
    }


def _conv(type_name):
    w = window_attrs()
    return LayerSchema(type_name, [
        YX("dilation", (1, 1), lists=("dilation", "dilations"), nd="dilations", min=1),
        Int("group", 1, min=1),
        w["kernel"],
        Int("output", min=1, doc="output channels (all groups together)"),
        w["pad"],
        w["pad_end"],
        w["stride"],
    ])


SCHEMAS = [_conv("Convolution"), _conv("Deconvolution")]
