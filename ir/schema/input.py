"""Input: a network entry point; its shape is its output port."""
from .layer import LayerSchema

SCHEMAS = [LayerSchema("Input", [])]
