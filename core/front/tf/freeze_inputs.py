"""--freeze_placeholder_with_value "name->value,...": the model's Placeholders (or
PlaceholderWithDefaults) of those names become Consts of those values in the
GraphDef, before the graph is built, as the reference's option did (typically a
training switch: is_training->False); whatever only they fed becomes constant and
folds away. A value is a number, True/False, or a list [v1 v2 ...] (or [v1,v2,...]);
it takes the placeholder's dtype and, where the placeholder has a full shape, that
shape (a single value fills it)."""
from __future__ import annotations

import re

import numpy as np

from core.errors import Error
from core.front.tf.builder import parse_input
from core.front.tf.tf_subgraph import TF_DTYPES, set_const

_ENTRY = re.compile(r"\s*([^,\[\]]+?)\s*->\s*(\[[^\]]*\]|[^,]*)\s*(?:,|$)")
_NUMPY = {enum: dtype for dtype, enum in TF_DTYPES.items()}
FEEDABLE = ("Placeholder", "PlaceholderWithDefault")
OPTION = "--freeze_placeholder_with_value"


def parse(text: str) -> dict[str, list[str]]:
    """{name: the value's words} of "name->value,name->[v v]"."""
    entries, pos = {}, 0
    text = text.strip()
    while pos < len(text):
        m = _ENTRY.match(text, pos)
        if m is None or not m.group(2).strip():
            raise Error('{} "{}" cannot be parsed at "{}": write name->value, a value being a number, True/False or '
                        "[v1 v2 ...], entries separated by commas.", OPTION, text, text[pos:pos + 40])
        name, value = m.group(1), m.group(2).strip()
        if name in entries:
            raise Error('{} "{}" freezes {} twice.', OPTION, text, name)
        entries[name] = [w for w in re.split(r"[\s,]+", value.strip("[]")) if w]
        pos = m.end()
    return entries


def _value(name: str, words: list[str], dtype: np.dtype, shape) -> np.ndarray:
    try:
        if dtype == np.bool_:
            table = {"true": True, "false": False, "1": True, "0": False}
            values = [table[w.lower()] for w in words]
        else:
            values = [float(w) for w in words]
    except (KeyError, ValueError):
        raise Error("{}: the value {} for '{}' is not a list of {} values.", OPTION, " ".join(words), name,
                    "True/False" if dtype == np.bool_ else "numeric") from None
    array = np.array(values)
    if dtype.kind in "iu" and not np.array_equal(array, np.round(array)):
        raise Error("{}: '{}' is {}, the value {} is not a list of integers.", OPTION, name, dtype, " ".join(words))
    with np.errstate(over="ignore", invalid="ignore"):
        array = array.astype(dtype)
    if shape is None or any(d < 0 for d in shape):
        return array.reshape(()) if array.size == 1 else array
    if array.size == 1:
        return np.full(shape, array.reshape(()), dtype)
    if array.size != int(np.prod(shape)):
        raise Error("{}: '{}' has the shape {} ({} values), the value gives {}.", OPTION, name, list(shape),
                    int(np.prod(shape)), array.size)
    return array.reshape(shape)


def _shape(node):
    if "shape" not in node.attr or node.attr["shape"].shape.unknown_rank:
        return None
    return [int(d.size) for d in node.attr["shape"].shape.dim]


def freeze_placeholders(graph_def, text: str) -> None:
    """Rewrites the named placeholders of `graph_def` into Consts (module doc)."""
    entries = parse(text)
    nodes = {node.name: node for node in graph_def.node}
    dropped: list[str] = []  # what the frozen ones read (a PlaceholderWithDefault's default)
    for name, words in entries.items():
        node = nodes.get(name)
        if node is None or node.op not in FEEDABLE:
            inputs = sorted(n.name for n in graph_def.node if n.op in FEEDABLE)
            raise Error("{}: the model has no placeholder '{}'; its placeholders are: {}.", OPTION, name,
                        ", ".join(inputs) or "none")
        enum = node.attr["dtype"].type
        dtype = _NUMPY.get(enum)
        if dtype is None:
            raise Error("{}: '{}' has a type (DataType {}) a value cannot be given for.", OPTION, name, enum)
        value = _value(name, words, dtype, _shape(node))
        dropped.extend(parse_input(text)[0] for text in node.input)
        del node.input[:]
        node.ClearField("attr")
        set_const(node, value)
    _remove_unread(graph_def, dropped)


def _remove_unread(graph_def, names: list[str]) -> None:
    """Removes the nodes of `names` (and what only they read) that nothing reads any
    more: a frozen default would otherwise be an output of the model."""
    pending = list(names)
    while pending:
        name = pending.pop()
        readers = [n for n in graph_def.node if any(parse_input(i)[0] == name for i in n.input)]
        index = next((i for i, n in enumerate(graph_def.node) if n.name == name), None)
        if readers or index is None:
            continue
        pending.extend(parse_input(i)[0] for i in graph_def.node[index].input)
        del graph_def.node[index]
