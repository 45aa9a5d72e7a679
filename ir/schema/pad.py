"""Pad (own type; the IR v2 catalog pads only inside Convolution and Pooling)."""
from .attribute import Enum, Float, Ints
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("Pad", [
        Ints("pads_begin", min=0, doc="values added before each axis"),
        Ints("pads_end", min=0, doc="values added after each axis"),
        Enum("pad_mode", ("constant", "reflect", "symmetric"), "constant",
             doc="reflect mirrors without the edge value, symmetric with it"),
        Float("pad_value", 0.0, doc="constant mode's value"),
    ]),
]
