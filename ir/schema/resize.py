"""Resample (nearest/linear by a factor or to a size) and Interp (the PSPNet/DeepLab fork layer)."""
from .attribute import Bool, Enum, Float, Int
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("Resample", [
        Bool("antialias", False),
        Float("factor", 0.0, min=0),
        Int("height", 0, min=0),
        Int("width", 0, min=0),
        Enum("type", ("caffe.ResampleParameter.NEAREST", "caffe.ResampleParameter.LINEAR",
                      "caffe.ResampleParameter.CUBIC"), "caffe.ResampleParameter.NEAREST",
             spellings={"NEAREST": "caffe.ResampleParameter.NEAREST", "nearest": "caffe.ResampleParameter.NEAREST",
                        "LINEAR": "caffe.ResampleParameter.LINEAR", "linear": "caffe.ResampleParameter.LINEAR",
                        "bilinear": "caffe.ResampleParameter.LINEAR", "CUBIC": "caffe.ResampleParameter.CUBIC",
                        "cubic": "caffe.ResampleParameter.CUBIC"}),
    ]),
    LayerSchema("Interp", [
        Int("height", 0, min=0), Int("width", 0, min=0),
        Int("zoom_factor", 1, min=1), Int("shrink_factor", 1, min=1),
        Int("pad_beg", 0, doc="pixels added (negative: cropped) before the input"),
        Int("pad_end", 0),
    ]),
]
