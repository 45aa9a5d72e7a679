"""ArgMax (Caffe semantics: top_k indices, optionally with the values)."""
from .attribute import Bool, Enum, Int
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("ArgMax", [Int("top_k", 1, min=1), Bool("out_max_val", False),
                           Int("axis", None, doc="absent: over all values of an item"),
                           Enum("ties", ("last", "first"), "last",
                                doc="among equal values the larger index first (Caffe) or the smaller (TensorFlow's "
                                    "ArgMax / ArgMin)")]),
]
