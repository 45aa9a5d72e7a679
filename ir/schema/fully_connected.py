"""FullyConnected (Caffe InnerProduct; weights OI)."""
from .attribute import Int
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema(("FullyConnected", "InnerProduct"), [
        Int("out-size", min=1, aliases=("out_size", "num_output")),
        Int("axis", 1, doc="the input is flattened from this axis on"),
    ]),
]
