"""StridedSlice (own type; the catalog's Crop has no stride): per input axis, output
element i is input element begin + i * stride."""
from .attribute import Ints
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("StridedSlice", [
        Ints("begin", min=0), Ints("stride", doc="non-zero, may be negative"), Ints("size", min=1),
    ], doc="one value per input axis; masks and negative indices are resolved by the converter"),
]
