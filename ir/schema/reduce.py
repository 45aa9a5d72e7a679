"""Reductions (own types; the IR v2 catalog only has global pooling): ReduceMean,
ReduceSum, ReduceMax, ReduceMin over `axes`; and the running sum along one axis,
CumSum (own type)."""
from .attribute import Bool, Int, Ints
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema(name, [Ints("axes", doc="the reduced axes"),
                       Bool("keep_dims", False, doc="1: reduced axes stay with size 1; 0: removed")])
    for name in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")
] + [
    LayerSchema("CumSum", [Int("axis", doc="the axis summed along (negative: from the end)"),
                           Bool("exclusive", False, doc="1: each element's sum leaves the element itself out"),
                           Bool("reverse", False, doc="1: summed from the end of the axis")],
                doc="y[..., i, ...] = x[..., 0, ...] + ... + x[..., i, ...] along `axis`"),
]
