"""The IR layer schema: each layer type's attributes, declared once.

The converter writes attributes through it (core/ops: `LayerSchema.write`), every
device's kernels read them through it (`LayerSchema.read`), so a name, a type or a
default is spelled in exactly one place. One layer family a module; FAMILIES lists
them. Types that are not here are custom layers: they pass through untouched.

    from ir.schema import layer_schema, read_attrs
    schema = layer_schema("Convolution")        # None for a custom type
    schema.read(layer)     # {"kernel": (3, 3), "stride": (1, 1), "group": 1, ...}: typed, defaults filled
    schema.write({"kernel": (3, 3), "output": 8})   # {"kernel-x": "3", "kernel-y": "3", "output": "8", ...}
    schema.check(layer.data)                    # [] or the problems (unknown names, bad values)
    read_attrs(layer)                           # layer_schema(layer.type).read(layer)

Attribute kinds, defaults and spellings: ir/schema/attribute.py.
"""
from __future__ import annotations

from ..errors import IRError
from . import (
    activation, argmax, const, convolution, ctc, detection, fully_connected, input, interpolate, linear, memory,
    normalization, pad, pooling, reduce, resize, roi_pooling, shape_ops, slicing, yolo,
)
from .attribute import (
    REQUIRED, YX, Attr, Bool, Enum, Float, Floats, Int, Ints, Same, Str,
)
from .layer import LayerSchema, SchemaError

FAMILIES = (activation, argmax, const, convolution, ctc, detection, fully_connected, input, interpolate, linear,
            memory, normalization, pad, pooling, reduce, resize, roi_pooling, shape_ops, slicing, yolo)


def _index() -> dict[str, LayerSchema]:
    by_type = {}
    for family in FAMILIES:
        for schema in family.SCHEMAS:
            for name in schema.types:
                if name in by_type:
                    raise ValueError(f"IR type {name} is declared twice in ir/schema")
                by_type[name] = schema
    return by_type


_BY_TYPE = _index()


def layer_schema(layer_type: str) -> LayerSchema | None:
    """The schema of an IR layer type, or None for a custom layer type."""
    return _BY_TYPE.get(layer_type)


def known_types() -> list[str]:
    """Every IR layer type the schema declares (aliases included), sorted."""
    return sorted(_BY_TYPE)


def read_attrs(layer) -> dict:
    """The typed attributes of an ir.Layer of a known type (SchemaError if they do not fit)."""
    schema = layer_schema(layer.type)
    if schema is None:
        raise IRError(f"IR type {layer.type!r} of layer {layer.name!r} has no schema (a custom layer type); "
                      "read its <data> attributes yourself")
    return schema.read(layer)


__all__ = [
    "LayerSchema", "SchemaError", "Attr", "REQUIRED", "Same",
    "Int", "Float", "Bool", "Str", "Enum", "Ints", "Floats", "YX",
    "layer_schema", "known_types", "read_attrs", "FAMILIES",
]
