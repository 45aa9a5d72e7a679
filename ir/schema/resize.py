"""Resample (nearest/linear by a factor or to a size) and Interp (the PSPNet/DeepLab fork layer)."""
from ..interp import ZOOM_RULES
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
        Int("pad_beg", 0, max=0, doc="Caffe crops only: 0 or negative"),
        Int("pad_end", 0, max=0),
        Enum("zoom_rule", ZOOM_RULES, "multiply", doc="multiply: in * zoom; deeplab: in + (in - 1) * (zoom - 1)"),
        Bool("align_corners", True),
    ], doc="output size rules: ir/interp.py"),
]
