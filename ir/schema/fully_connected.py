"""FullyConnected (Caffe InnerProduct; weights OI) and MatMul (a product of two tensors)."""
from .attribute import Bool, Int
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema(("FullyConnected", "InnerProduct"), [
        Int("out-size", min=1, aliases=("out_size", "num_output")),
        Int("axis", 1, doc="the input is flattened from this axis on"),
    ]),
    LayerSchema("MatMul", [
        Bool("transpose_a", False, doc="input 0's last two axes swapped first"),
        Bool("transpose_b", False, doc="input 1's last two axes swapped first"),
    ], doc="numpy's matmul of inputs 0 and 1 (both at least 2-D; leading axes broadcast), as OpenVINO's MatMul"),
]
