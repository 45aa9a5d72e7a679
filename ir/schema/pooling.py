"""Pooling (catalog: "Pooling Layer"): max/avg, Caffe's ceil rounding by default."""
from .attribute import Bool, Enum
from .convolution import window_attrs
from .layer import LayerSchema

_w = window_attrs()

SCHEMAS = [
    LayerSchema("Pooling", [
        _w["kernel"],
        _w["pad"],
        _w["pad_end"],
        _w["stride"],
        Enum("pool-method", ("max", "avg"), aliases=("pool_method",)),
        # the catalog spells it "true"/"false"; Caffe's AVE counts the padding (false)
        Bool("exclude-pad", False, words=True, aliases=("exclude_pad",)),
        Enum("rounding_type", ("ceil", "floor"), "ceil"),
    ]),
]
