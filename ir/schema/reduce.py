"""Reductions (own types; the IR v2 catalog only has global pooling): ReduceMean,
ReduceSum, ReduceMax, ReduceMin over `axes`."""
from .attribute import Bool, Ints
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema(name, [Ints("axes", doc="the reduced axes"),
                       Bool("keep_dims", False, doc="1: reduced axes stay with size 1; 0: removed")])
    for name in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")
]
