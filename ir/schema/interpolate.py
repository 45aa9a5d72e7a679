"""Interpolate (own type): TensorFlow's image resizes where the catalog's Resample
computes something else (core/ops/interpolate.py has the coordinate rules)."""
from .attribute import Bool, Enum, Int
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("Interpolate", [
        Enum("mode", ("nearest", "linear", "cubic"), doc="cubic: TensorFlow's resize_bicubic (ir/cubic.py)"),
        Bool("align_corners", False),
        Bool("half_pixel_centers", False),
        Int("height", min=1),
        Int("width", min=1),
    ]),
]
