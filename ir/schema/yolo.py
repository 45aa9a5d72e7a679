"""RegionYolo and ReorgYolo (YOLO v2/v3 heads)."""
from .attribute import Bool, Floats, Int, Ints
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("RegionYolo", [
        Int("coords", 4), Int("classes"), Int("num"), Bool("do_softmax", True),
        Ints("mask", None), Floats("anchors", None), Int("axis", 1), Int("end_axis", -1),
    ]),
    LayerSchema("ReorgYolo", [Int("stride", min=1)]),
]
