"""Sub-graph replacement configuration files (JSON), as the reference guide
describes them (--tensorflow_use_custom_operations_config, and
--tensorflow_custom_operations_config_update which fills in `inputs`/`outputs`).

A file is a list of replacement descriptions:

    {"id": "InceptionBlockReplacer",          mandatory: links the description to its replacer class
     "match_kind": "scope",                   scope | points | general
     "instances": [".*Mixed_5b", ...],        scope: node name prefix regexes, one per instance
                                              points: {"start_points": [...], "end_points": [...]}
     "op": "InceptionBlock",                  optional: replace each instance by one node of this op
     "custom_attributes": {...},              optional: static attributes of the new layer
     "inputs": [[{"node": "Branch_0/Conv2D$", "port": 0}, ...], ...],   scope: filled in by _update
     "outputs": [{"node": "concat$", "port": 0}, ...],
     "include_inputs_to_sub_graph": true, "include_outputs_to_sub_graph": true}   points

The machinery works on node names, op types and edges of the core graph, so it
applies to every framework mo-core reads, not only TensorFlow. The files are
untrusted input: read with a size limit, parsed as JSON only, every field checked
(errors cite the reference FAQ).
"""
from __future__ import annotations

import json
import os
import re
import sys

from core.errors import Error

MAX_CONFIG_BYTES = 16 << 20
MATCH_KINDS = ("scope", "points", "general")


class CustomReplacementDescriptor:
    """One replacement description of a configuration file (the reference's name)."""

    match_kind: str | None = None

    def __init__(self, desc: dict, path: str, index: int):
        self._desc = desc
        self.path = path
        self.index = index

    # --- the reference's accessors ---------------------------------------------------
    @property
    def id(self) -> str:
        return self._desc["id"]

    replacement_id = id

    @property
    def op(self) -> str | None:
        return self._desc.get("op")

    @property
    def instances(self):
        return self._desc.get("instances")

    @property
    def custom_attributes(self) -> dict:
        return self._desc.get("custom_attributes", {})

    def has(self, key: str) -> bool:
        return key in self._desc

    def get_inputs_description(self) -> list[list[tuple[str, int]]]:
        return [[(item["node"], item["port"]) for item in tensor] for tensor in self._desc.get("inputs", [])]

    def get_outputs_description(self) -> list[tuple[str, int]]:
        return [(item["node"], item["port"]) for item in self._desc.get("outputs", [])]

    def get_config_file_representation(self) -> dict:
        return self._desc

    def where(self) -> str:
        return "replacement '{}' (#{} in '{}')".format(self._desc.get("id"), self.index + 1, self.path)

    # --- checks ---------------------------------------------------------------------------
    def validate(self):
        if "custom_attributes" in self._desc and not isinstance(self._desc["custom_attributes"], dict):
            raise self.invalid("'custom_attributes' must be a JSON object")
        if "op" in self._desc and not (isinstance(self.op, str) and self.op):
            raise self.invalid("'op' must be the name of an operation")
        _check_ports(self, "inputs", self._desc.get("inputs", []), nested=True)
        _check_ports(self, "outputs", self._desc.get("outputs", []), nested=False)

    def invalid(self, problem: str, faq: int = 71) -> Error:
        return Error("File '{}' validation failed: {}: {}.", self.path, self.where(), problem, faq=faq)


class CustomReplacementDescriptorScope(CustomReplacementDescriptor):
    match_kind = "scope"

    def validate(self):
        instances = self.instances
        if not instances:
            raise Error("No instance(s) is(are) defined for the custom replacement '{}' in '{}': 'instances' must "
                        "list node name patterns.", self.id, self.path, faq=65)
        if not isinstance(instances, list) or not all(isinstance(i, str) and i for i in instances):
            raise self.invalid("'instances' of a scope replacement must be a list of node name regexes")
        for pattern in instances:
            _check_regex(self, pattern)
        super().validate()
        for tensor in self.get_inputs_description():
            for regex, _ in tensor:
                _check_regex(self, regex)
        for regex, _ in self.get_outputs_description():
            _check_regex(self, regex)

    def sub_graph_instances(self) -> list[str]:
        return list(self.instances)


class CustomReplacementDescriptorPoints(CustomReplacementDescriptor):
    match_kind = "points"

    def validate(self):
        instances = self.instances
        if not instances:
            raise Error("No instance(s) is(are) defined for the custom replacement '{}' in '{}': give "
                        "{{\"start_points\": [...], \"end_points\": [...]}}.", self.id, self.path, faq=65)
        if not isinstance(instances, dict) or set(instances) != {"start_points", "end_points"}:
            raise Error("The instance must be a single dictionary for the custom replacement with id '{}' in '{}': "
                        "{{\"start_points\": [node names], \"end_points\": [node names]}}.", self.id, self.path,
                        faq=66)
        for key in ("start_points", "end_points"):
            points = instances[key]
            if not isinstance(points, list) or not points or not all(isinstance(p, str) and p for p in points):
                raise Error("The instance of the custom replacement with id '{}' in '{}' needs a non-empty list of "
                            "node names in '{}'.", self.id, self.path, key, faq=66)
        for key in ("include_inputs_to_sub_graph", "include_outputs_to_sub_graph"):
            if not isinstance(self._desc.get(key, True), bool):
                raise self.invalid("'{}' must be true or false".format(key))
        super().validate()

    @property
    def start_points(self) -> list[str]:
        return list(self.instances["start_points"])

    @property
    def end_points(self) -> list[str]:
        return list(self.instances["end_points"])

    @property
    def include_inputs(self) -> bool:
        return self._desc.get("include_inputs_to_sub_graph", True)

    @property
    def include_outputs(self) -> bool:
        return self._desc.get("include_outputs_to_sub_graph", True)


class CustomReplacementDescriptorGeneral(CustomReplacementDescriptor):
    match_kind = "general"


_KINDS = {cls.match_kind: cls for cls in (CustomReplacementDescriptorScope, CustomReplacementDescriptorPoints,
                                          CustomReplacementDescriptorGeneral)}


def _check_regex(desc, pattern: str):
    try:
        re.compile(pattern)
    except re.error as exc:
        raise desc.invalid("'{}' is not a valid regular expression ({})".format(pattern, exc)) from None


def _check_ports(desc, key: str, value, nested: bool):
    def port_ok(item):
        return (isinstance(item, dict) and isinstance(item.get("node"), str) and isinstance(item.get("port"), int)
                and not isinstance(item.get("port"), bool) and item["port"] >= 0)
    shape = "a list of lists of {\"node\": regex, \"port\": int}" if nested else "a list of {\"node\": regex, " \
                                                                                 "\"port\": int}"
    if not isinstance(value, list):
        raise desc.invalid("'{}' must be {}".format(key, shape))
    for item in value:
        items = item if nested else [item]
        if not isinstance(items, list) or not items or not all(port_ok(i) for i in items):
            raise desc.invalid("'{}' must be {}".format(key, shape))


# --- reading and writing files -------------------------------------------------------
def read_config_json(path: str, faq_missing: int = 68, faq_parse: int = 69):
    if not os.path.isfile(path):
        raise Error("Custom replacements configuration file '{}' does not exist.", path, faq=faq_missing)
    try:
        size = os.path.getsize(path)
        if size > MAX_CONFIG_BYTES:
            raise Error("Failed to parse custom replacements configuration file '{}': it has {} bytes, more than "
                        "the {} a configuration file may have.", path, size, MAX_CONFIG_BYTES, faq=faq_parse)
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
        text = raw.decode("utf-8-sig")
    except OSError as exc:
        raise Error("Cannot read the custom replacements configuration file '{}': {}.", path, exc.strerror,
                    faq=faq_parse) from None
    except UnicodeDecodeError as exc:
        raise Error("Failed to parse custom replacements configuration file '{}': it is not UTF-8 text ({}).", path,
                    exc.reason, faq=faq_parse) from None
    def non_finite(token):
        raise json.JSONDecodeError(f"{token} is not a JSON number (give a finite value)", text, 0)
    try:
        return json.loads(text, parse_constant=non_finite)  # (Python's json reads NaN and Infinity otherwise)
    except json.JSONDecodeError as exc:
        raise Error("Failed to parse custom replacements configuration file '{}': {} (line {}, column {}). It must "
                    "be a JSON list of replacement descriptions.", path, exc.msg, exc.lineno, exc.colno,
                    faq=faq_parse) from None
    except RecursionError:
        raise Error("Failed to parse custom replacements configuration file '{}': it is nested too deeply.", path,
                    faq=faq_parse) from None
    except ValueError:  # a number Python refuses to read (more than sys.get_int_max_str_digits() digits)
        raise Error("Failed to parse custom replacements configuration file '{}': it holds an integer of more than "
                    "{} digits, which no attribute can be.", path, sys.get_int_max_str_digits(),
                    faq=faq_parse) from None


def parse_descriptions(data, path: str) -> list[CustomReplacementDescriptor]:
    if not isinstance(data, list):
        raise Error("File '{}' validation failed: the file must hold a JSON list of replacement descriptions, not "
                    "a {}.", path, type(data).__name__, faq=71)
    result, ids = [], {}
    for index, desc in enumerate(data):
        if not isinstance(desc, dict):
            raise Error("File '{}' validation failed: replacement #{} is not a JSON object.", path, index + 1, faq=71)
        if "id" in desc and not isinstance(desc["id"], str):
            raise Error("File '{}' validation failed: the 'id' of replacement #{} must be a string, got {}.", path,
                        index + 1, json.dumps(desc["id"])[:60], faq=71)
        if not desc.get("id"):
            raise Error("One of the custom replacements in the configuration file '{}' (#{}) does not contain "
                        "attribute 'id'.", path, index + 1, faq=70)
        kind = desc.get("match_kind")
        if kind is None:
            raise Error("File '{}' validation failed: replacement '{}' has no 'match_kind' (one of {}).", path,
                        desc["id"], ", ".join(MATCH_KINDS), faq=71)
        if kind not in _KINDS:
            raise Error("No class registered for match kind '{}' (replacement '{}' in '{}'). Supported match kinds "
                        "are {}.", kind, desc["id"], path, ", ".join(MATCH_KINDS), faq=64)
        if desc["id"] in ids:
            raise Error("File '{}' validation failed: replacements #{} and #{} have the same id '{}'.", path,
                        ids[desc["id"]] + 1, index + 1, desc["id"], faq=71)
        ids[desc["id"]] = index
        descriptor = _KINDS[kind](desc, path, index)
        descriptor.validate()
        result.append(descriptor)
    return result


def load_custom_replacement_configs(paths: list[str]) -> list[CustomReplacementDescriptor]:
    """The descriptions of every file, in order; an id may appear once in all of them."""
    result, seen = [], {}
    for path in paths:
        for desc in parse_descriptions(read_config_json(path), path):
            if desc.id in seen:
                raise Error("The replacement id '{}' is defined twice: in '{}' and in '{}'.", desc.id, seen[desc.id],
                            path, faq=71)
            seen[desc.id] = path
            result.append(desc)
    return result


def write_config_atomically(path: str, data):
    """Writes the JSON next to the file and renames it over: a failure never leaves a
    half-written configuration."""
    from ir.writer import write_file_atomically
    text = json.dumps(data, indent=4, sort_keys=True) + "\n"
    try:
        write_file_atomically(path, text.encode("utf-8"))
    except OSError as exc:
        raise Error("Cannot write the updated configuration file '{}': {}.", path, exc.strerror or exc) from None


def load_for_update(path: str) -> tuple[list, list[CustomReplacementDescriptor]]:
    """(the raw JSON list, its descriptions) of a file to update; a broken file is FAQ #72."""
    try:
        data = read_config_json(path)
        return data, parse_descriptions(data, path)
    except Error as err:
        raise Error("Cannot update the file '{}' because it is broken: {}", path, err.message, faq=72) from None
