"""ROIPooling (Fast R-CNN) and PSROIPooling (R-FCN)."""
from .attribute import Enum, Float, Int
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("ROIPooling", [
        Int("pooled_h", min=1), Int("pooled_w", min=1), Float("spatial_scale"),
        Enum("method", ("max", "bilinear"), "max"),
    ]),
    LayerSchema("PSROIPooling", [
        Int("output_dim", min=1), Int("group_size", min=1), Float("spatial_scale"),
        Enum("mode", ("average", "bilinear"), "average"),
    ]),
]
