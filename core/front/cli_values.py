"""Parsing of --input, --output, --input_shape, --mean_values, --scale_values.

The reference FAQ wording is kept for each mistake (#56-#63).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from core.errors import Error

_MAX_ELEMENTS = 2**63 - 1
_GROUP = re.compile(r"[\(\[]([^\)\]]*)[\)\]]")


def parse_input_shapes(text: str | None) -> list[np.ndarray]:
    """"(1,3,227,227)" or "[1,3,227,227],[1,6,1,1]" -> list of int64 arrays."""
    if not text:
        return []
    text = text.strip()
    groups = _GROUP.findall(text)
    leftover = _GROUP.sub("", text).replace(",", "").strip()
    if not groups or leftover:
        raise Error("Input shape \"{}\" cannot be parsed. Write it as [1,3,227,227] or (1,3,227,227); for several "
                    "inputs: --input data,rois --input_shape (1,3,227,227),(1,6,1,1), without spaces.", text, faq=56)
    shapes = []
    for g in groups:
        try:
            dims = [int(x) for x in g.split(",") if x.strip() != ""]
        except ValueError:
            raise Error("Input shape \"{}\" cannot be parsed: \"{}\" is not a list of integers.", text, g,
                        faq=56) from None
        if not dims or any(d <= 0 for d in dims):
            raise Error("Input shape \"{}\" cannot be parsed: every dimension of [{}] must be a positive integer.",
                        text, g, faq=56)
        if math.prod(dims) > _MAX_ELEMENTS:
            raise Error("Input shape \"{}\": [{}] has {} elements, more than int64 can count (2^63-1). Give the "
                        "real input size.", text, g, math.prod(dims), faq=56)
        shapes.append(np.array(dims, dtype=np.int64))
    return shapes


_FLOAT_TYPES = {"f32", "float", "float32"}
_INPUT_ENTRY = re.compile(r"(?P<name>[^\[\]{}]+?)\s*(?:\[(?P<shape>[^\]]*)\])?\s*(?:\{(?P<type>[^}]*)\})?"
                          r"\s*(?:->\s*(?P<value>.+))?")


@dataclass
class InputEntry:
    """One entry of mo's --input: NODE (or PORT:NODE, NODE:PORT), then optionally [SHAPE], {TYPE}, ->VALUE."""
    name: str
    shape: np.ndarray | None = None
    value: str | None = None  # "->VALUE": the input is frozen to it (TensorFlow)


def split_input_entries(text: str | None) -> list[InputEntry]:
    """mo's --input: "data[1,3,224,224],info[1 3]{f32},flag->False,k[2]->[1.0 2.0]" (commas inside brackets
    do not split entries)."""
    entries = []
    for part in _top_level_split(text or ""):
        m = _INPUT_ENTRY.fullmatch(part)
        if m is None:
            raise Error("--input \"{}\": \"{}\" cannot be parsed; write NODE, PORT:NODE or NODE:PORT, optionally "
                        "followed by [SHAPE], {{TYPE}} and ->VALUE, e.g. data[1,3,224,224] or is_training->False.",
                        text, part, faq=56)
        name, dims, kind, value = (m.group(g) for g in ("name", "shape", "type", "value"))
        shape = None
        if dims is not None:
            shape = parse_input_shapes("[{}]".format(",".join(dims.replace(",", " ").split())))[0]
        if kind is not None and value is None and kind.strip().lower() not in _FLOAT_TYPES:
            raise Error("--input \"{}\": the type {{{}}} of {}: the inputs of mo-core's IR are f32 (give {{f32}} or "
                        "no type; a type only decides how a frozen ->VALUE is read, and the placeholder's own type "
                        "does that here).", text, kind, name.strip())
        entries.append(InputEntry(name.strip(), shape, value.strip() if value else None))
    return entries


def _top_level_split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def split_names(text: str | None) -> list[str]:
    if not text:
        return []
    return [t.strip() for t in text.split(",") if t.strip()]


def port_spec_readings(text: str) -> list[tuple]:
    """(node name, in_port or None, out_port or None) of each way to read NODE, PORT:NODE or NODE:PORT, the
    whole name first."""
    readings = [(text, None, None)]
    head, _, tail = text.partition(":")
    if head.isdigit() and tail:
        readings.append((tail, int(head), None))
    head, _, tail = text.rpartition(":")
    if tail.isdigit() and head:
        readings.append((head, None, int(tail)))
    return readings


def parse_port_spec(graph, text: str):
    """Resolves NODE, PORT:NODE (input port) or NODE:PORT (output port) against the graph.

    Returns (op node, in_port or None, out_port or None). A full name that exists
    wins over a port reading, since layer names may contain ':'.
    """
    for name, in_port, out_port in port_spec_readings(text):
        node = graph.op_by_name(name)
        if node is not None:
            return node, in_port, out_port
    raise Error("Node \"{}\" does not exist in the graph. Layer names are matched exactly (check the prototxt); "
                "use NODE, PORT:NODE for an input port or NODE:PORT for an output port.", text, faq=25)


def parse_values(text: str | None, what: str, input_names: list[str], faq_parse=58, faq_names=60, faq_count=62):
    """--mean_values / --scale_values: "data[1,2,3],info[4,5]" or "(1,2,3)" / "[1,2,3]".

    Returns {input name or None: np.float32 array}. None stands for "the only input".
    """
    if not text:
        return {}
    text = text.strip()
    if re.fullmatch(r"(\s*[^\[\](),]+\[[^\]]*\]\s*,?)+", text):  # name[values],name[values]
        named = re.findall(r"([^\[\](),]+)\[([^\]]*)\]", text)
        names = [name.strip() for name, _ in named]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise Error("{} \"{}\" gives values for {} more than once; give each input's values once.", what, text,
                        ", ".join(twice), faq=faq_parse)
        return {name: _floats(values, text, what, faq_parse) for name, (_, values) in zip(names, named)}
    groups = _GROUP.findall(text)
    if not groups or _GROUP.sub("", text).replace(",", "").strip():
        raise Error("{} \"{}\" cannot be parsed. Values cannot be parsed: write them as (R,G,B), [R,G,B] or "
                    "input_name[R,G,B],other_input[...].", what, text, faq=faq_parse)
    if len(groups) == 1 and len(input_names) <= 1:
        return {input_names[0] if input_names else None: _floats(groups[0], text, what, faq_parse)}
    if not input_names:
        raise Error("You should specify input for each {} value: name the inputs with --input (or write "
                    "name[values]).", what.split()[0].lstrip("-").replace("_values", ""), faq=faq_names)
    if len(groups) != len(input_names):
        raise Error("Number of inputs and {} does not match: {} inputs ({}) and {} groups of values.", what,
                    len(input_names), ",".join(input_names), len(groups), faq=faq_count)
    return {name: _floats(g, text, what, faq_parse) for name, g in zip(input_names, groups)}


def _floats(values: str, text: str, what: str, faq: int) -> np.ndarray:
    try:
        numbers = [float(v) for v in values.split(",") if v.strip()]
        with np.errstate(over="ignore"):
            result = np.array(numbers, dtype=np.float32)
        bad = [n for n, r in zip(numbers, result) if not np.isfinite(r)]
        if bad:
            raise Error("{} \"{}\": {} is not a finite float32 number (the IR's weights are float32).", what, text,
                        bad[0], faq=faq)
        return result
    except ValueError:
        raise Error("{} \"{}\" cannot be parsed. Values cannot be parsed: \"{}\" is not a list of numbers.", what,
                    text, values, faq=faq) from None
