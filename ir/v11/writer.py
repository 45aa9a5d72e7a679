"""Write a Model as an IR v11 .xml + .bin pair that OpenVINO's runtime reads.

<net name version="11">, then every op as a <layer> with its opset `version`,
<data> attributes, rt_info, and ports (inputs numbered from 0, outputs after them,
each with its precision and, for outputs, its tensor names); <edges>; and the
model's <rt_info> (who wrote it and the conversion options). The .bin holds the
Consts' data back to back, identical bytes stored once. Both files appear
atomically (ir.writer.write_pair_atomically).
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from ..errors import IRError
from ..writer import _escape_attr, write_pair_atomically
from .model import ELEMENT_TYPES, Model

_XML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def _place_constants(model: Model):
    """{id(op): (offset, size)} of every Const and the unique chunks in file order."""
    places, chunks, by_digest, end = {}, [], {}, 0
    for op in model.ops:
        if op.type != "Const":
            continue
        raw = np.ascontiguousarray(op.value).reshape(-1).view(np.uint8)
        digest = hashlib.blake2b(raw.data, digest_size=16).digest()
        offset = next((off for other, off in by_digest.get(digest, ()) if np.array_equal(other, raw)), None)
        if offset is None:
            offset = end
            by_digest.setdefault(digest, []).append((raw, offset))
            chunks.append(raw)
            end += raw.size
        places[id(op)] = (offset, raw.size)
    return places, chunks


def _names_text(names) -> str:
    # OpenVINO splits the tensor names at commas; a comma inside a name is escaped
    return ",".join(n.replace(",", "\\,") for n in names)


def _rt_info_lines(rt_info: dict, indent: str) -> list[str]:
    lines = []
    for key, value in rt_info.items():
        tag = key if _XML_NAME.fullmatch(key) else re.sub(r"[^A-Za-z0-9_.\-]", "_", key).lstrip(".-0123456789")
        if isinstance(value, dict):
            lines.append(f"{indent}<{tag}>")
            lines += _rt_info_lines(value, indent + "    ")
            lines.append(f"{indent}</{tag}>")
        else:
            lines.append(f'{indent}<{tag} value="{_escape_attr(str(value), f"rt_info {key!r}")}"/>')
    return lines


def _port_lines(port_id, tensor, names: bool) -> list[str]:
    precision = ELEMENT_TYPES[tensor.element_type][0]
    extra = ""
    if names and tensor.names:
        extra = f' names="{_escape_attr(_names_text(tensor.names), "tensor names")}"'
    lines = [f'                <port id="{port_id}" precision="{precision}"{extra}>']
    lines += [f"                    <dim>{int(d)}</dim>" for d in tensor.shape]
    lines.append("                </port>")
    return lines


def render_xml(model: Model, places: dict) -> str:
    ids = {id(op): i for i, op in enumerate(model.ops)}
    out = ['<?xml version="1.0"?>', f'<net name="{_escape_attr(model.name, "model name")}" version="11">',
           "    <layers>"]
    edges = []
    for i, op in enumerate(model.ops):
        name = _escape_attr(op.name, f"name of {op.type} {op.name!r}")
        out.append(f'        <layer id="{i}" name="{name}" type="{_escape_attr(op.type, "op type")}" '
                   f'version="{_escape_attr(op.version, "op version")}">')
        attrs = dict(op.attrs)
        if op.type == "Const":
            offset, size = places[id(op)]
            attrs = {"element_type": op.out.element_type, "shape": ",".join(str(d) for d in op.out.shape),
                     "offset": str(offset), "size": str(size)}
        if attrs:
            for key in attrs:
                if not _XML_NAME.fullmatch(key):
                    raise IRError(f"attribute name {key!r} of {op.type} {op.name!r} is not a valid XML name")
            text = " ".join(f'{k}="{_escape_attr(v, f"attribute {k!r} of {op.name!r}")}"' for k, v in attrs.items())
            out.append(f"            <data {text}/>")
        if op.rt_info:
            out.append("            <rt_info>")
            out += [f'                <attribute name="{a}" version="0"/>' for a in op.rt_info]
            out.append("            </rt_info>")
        if op.inputs:
            out.append("            <input>")
            for port, tensor in enumerate(op.inputs):
                out += _port_lines(port, tensor, names=False)
                edges.append((ids[id(tensor.producer)], len(tensor.producer.inputs) + tensor.index, i, port))
            out.append("            </input>")
        if op.outputs:
            out.append("            <output>")
            for k, tensor in enumerate(op.outputs):
                out += _port_lines(len(op.inputs) + k, tensor, names=True)
            out.append("            </output>")
        out.append("        </layer>")
    out.append("    </layers>")
    out.append("    <edges>")
    out += [f'        <edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}"/>' for a, b, c, d in edges]
    out.append("    </edges>")
    if model.rt_info:
        out.append("    <rt_info>")
        out += _rt_info_lines(model.rt_info, "        ")
        out.append("    </rt_info>")
    out.append("</net>")
    return "\n".join(out) + "\n"


def write_model(model: Model, xml_path, bin_path=None) -> None:
    xml_path = Path(xml_path)
    bin_path = xml_path.with_suffix(".bin") if bin_path is None else Path(bin_path)
    if xml_path.resolve() == bin_path.resolve():
        raise IRError(f"the .xml and .bin paths are the same file ({bin_path}); give them different names")
    places, chunks = _place_constants(model)
    try:
        xml_bytes = render_xml(model, places).encode("utf-8")
    except IRError as err:
        err.where = err.where or str(xml_path)
        raise
    write_pair_atomically(xml_path, bin_path, xml_bytes, chunks)
