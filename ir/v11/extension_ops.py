"""Layers OpenVINO runs through an extension the user loads (`core.add_extension`).

A layer type with no opset equivalent (a user's custom layer, a Caffe-backed one)
is written as the extension's op when the user names it:

    --ov_extension_ops TYPE[=OP_TYPE][@VERSION][,...]

OP_TYPE defaults to TYPE; VERSION is the opset name the extension registers its op
under ("extension", the default, is where OpenVINO's `OpExtension` puts custom ops
written in Python or C++ without an opset of their own). The op gets the layer's
inputs in port order, then its blobs as f32 constants (1-D, in blob order), and the
layer's IR v2 <data> attributes as they are; its outputs have the layer's shapes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import IRError
from ..model import CAFFE_DEFINITION_ATTR
from .layers.base import Mapping

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_ITEM = re.compile(r"(?P<type>[^=@]+)(?:=(?P<op>[^=@]+))?(?:@(?P<version>[^=@]+))?")


@dataclass(frozen=True)
class ExtensionOp:
    layer_type: str
    op_type: str
    version: str = "extension"


def parse_extension_ops(text: str | None) -> dict[str, ExtensionOp]:
    """'Reduction=MyReduce@my_ops,BNLL' -> {layer type: ExtensionOp}."""
    result: dict[str, ExtensionOp] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        match = _ITEM.fullmatch(item)
        parts = match and [(match.group(k) or "").strip() for k in ("type", "op", "version")]
        if not parts or not all(_NAME.fullmatch(p) for p in (parts[0], parts[1] or parts[0], parts[2] or "x")):
            raise IRError(f"--ov_extension_ops: cannot read {item!r}; write TYPE[=OP_TYPE][@VERSION] with names of "
                          "letters, digits, '_', '-', '.', e.g. Reduction=MyReduce@my_opset")
        layer_type, op_type, version = parts
        if layer_type in result:
            raise IRError(f"--ov_extension_ops names the layer type {layer_type!r} twice")
        result[layer_type] = ExtensionOp(layer_type, op_type or layer_type, version or "extension")
    return result


def map_extension_layer(m: Mapping, ext: ExtensionOp):
    inputs = list(m.inputs)
    for blob_name, blob in m.layer.blobs.items():
        values = np.asarray(blob)
        if values.dtype.kind != "f":
            values = values.astype(np.float32)
        inputs.append(m.const(values.reshape(-1), blob_name))
    shapes = [p.dims for p in m.layer.outputs]
    op = m.model.add(ext.op_type, inputs, shapes, name=m.layer.name, version=ext.version)
    # as the v2 IR spells them (the extension was written for them), without the
    # definition our own daemons run Caffe-backed layers from
    op.attrs = {k: v for k, v in m.layer.data.items() if k != CAFFE_DEFINITION_ATTR}
    return op.outputs
