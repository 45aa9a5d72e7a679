"""Const (own type; the IR v2 catalog has none): a constant tensor read as a layer
output. No attributes: the value is the blob `custom`, its shape the output port's
dims."""
from .layer import LayerSchema

SCHEMAS = [LayerSchema("Const", [], doc="value: blob 'custom' (C order), shape: the output port's dims")]
