"""Memory: a pair of layers (index 0 writes, 1 reads) sharing a state by `id`."""
from .attribute import Int, Str
from .layer import LayerSchema

SCHEMAS = [LayerSchema("Memory", [Str("id"), Int("index", min=0), Int("size", 2, min=1)])]
