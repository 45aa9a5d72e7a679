"""The OD API's pipeline.config: protobuf text format, read by hand.

Only a handful of fields matter to the conversion (image resizer, anchors, box
coder, post-processing, the Faster R-CNN stages), and the file is untrusted input,
so it is read with a small tokenizer of our own rather than the OD API's schema
(which would need its dozens of .proto files): a size limit, a nesting limit, a
token limit, and every error a [ ERROR ] naming the file and line. A message is a
dict field name -> list of values (text fields repeat); `PipelineConfig` gives the
typed values the replacers use, with the OD API's defaults where a field is unset.
"""
from __future__ import annotations

import math
import os
import re

from core.errors import Error

MAX_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_TOKENS = 200_000

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n]+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)[fF]?|[-+]?(?:inf|nan)\b)
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*|\[[A-Za-z0-9_./]+\])
  | (?P<punct>[{}<>:,;\[\]])
""", re.VERBOSE)


def _tokens(text: str, path: str):
    pos, line, count = 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise Error("The pipeline config '{}' has an unexpected character {!r} at line {}: it must be protobuf "
                        "text format (the pipeline.config the OD API exporter writes next to the frozen graph).",
                        path, text[pos], line)
        kind = m.lastgroup
        value = m.group()
        if kind != "space":
            count += 1
            if count > MAX_TOKENS:
                raise Error("The pipeline config '{}' has more than {} tokens: not an OD API pipeline.config.",
                            path, MAX_TOKENS)
            yield kind, value, line
        line += value.count("\n")
        pos = m.end()


def parse_text(text: str, path: str = "<text>") -> dict:
    """Protobuf text format -> {field: [values]} (nested messages are dicts)."""
    tokens = list(_tokens(text, path))
    pos = 0

    def fail(what, line):
        raise Error("The pipeline config '{}' is not valid protobuf text at line {}: {}.", path, line, what)

    def message(depth, closing):
        nonlocal pos
        if depth > MAX_DEPTH:
            fail("messages nested deeper than {}".format(MAX_DEPTH), tokens[pos - 1][2])
        fields: dict = {}
        while True:
            if pos >= len(tokens):
                if closing:
                    fail("a '{}' is missing at the end".format(closing), tokens[-1][2] if tokens else 1)
                return fields
            kind, value, line = tokens[pos]
            if kind == "punct" and value == closing:
                pos += 1
                return fields
            if kind != "name":
                fail("expected a field name, found {!r}".format(value), line)
            pos += 1
            name = value
            colon = pos < len(tokens) and tokens[pos][1] == ":"
            if colon:
                pos += 1
            if pos >= len(tokens):
                fail("field '{}' has no value".format(name), line)
            kind, value, line = tokens[pos]
            if kind == "punct" and value in "{<":
                pos += 1
                fields.setdefault(name, []).append(message(depth + 1, "}" if value == "{" else ">"))
            elif kind == "punct" and value == "[" and colon:
                pos += 1
                while pos < len(tokens) and tokens[pos][1] != "]":
                    fields.setdefault(name, []).append(scalar(tokens[pos], name))
                    pos += 1
                    if pos < len(tokens) and tokens[pos][1] == ",":
                        pos += 1
                pos += 1
            elif colon:
                fields.setdefault(name, []).append(scalar(tokens[pos], name))
                pos += 1
            else:
                fail("field '{}' needs ':' before its value".format(name), line)
            if pos < len(tokens) and tokens[pos][1] in ",;":
                pos += 1

    def scalar(token, name):
        kind, value, line = token
        if kind == "string":
            try:
                return value[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
            except UnicodeDecodeError as exc:
                fail("field '{}' has a malformed escape in {!r}: {}".format(name, value[:40], exc.reason), line)
        if kind == "number":
            text_value = value.rstrip("fF") if not value.lower().endswith(("inf", "nan")) else value
            try:
                return int(text_value, 0) if re.fullmatch(r"[-+]?\d+", text_value) else float(text_value)
            except ValueError:
                fail("field '{}' has a malformed number {!r}".format(name, value), line)
        if kind == "name":
            return {"true": True, "false": False, "True": True, "False": False}.get(value, value)  # enums stay names
        fail("field '{}' has no value (found {!r})".format(name, value), line)

    return message(0, None)


def read_pipeline_config(path: str) -> "PipelineConfig":
    if not os.path.isfile(path):
        raise Error("--tensorflow_object_detection_api_pipeline_config '{}' {}: give the pipeline.config file that "
                    "the OD API exporter wrote next to frozen_inference_graph.pb.", path,
                    "is a directory" if os.path.isdir(path) else "does not exist")
    size = os.path.getsize(path)
    if size > MAX_BYTES:
        raise Error("The pipeline config '{}' is {} bytes; an OD API pipeline.config is a few KB (limit {} bytes).",
                    path, size, MAX_BYTES)
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Error("The pipeline config '{}' is not UTF-8 text (byte {}): give the pipeline.config, not the "
                    "frozen graph.", path, exc.start) from None
    return PipelineConfig(parse_text(text, path), path)


class PipelineConfig:
    """The fields of a TrainEvalPipelineConfig the replacers use, with the OD API's defaults."""

    def __init__(self, fields: dict, path: str):
        self.path = path
        models = fields.get("model", [])
        if len(models) != 1 or not isinstance(models[0], dict):
            raise Error("The pipeline config '{}' has no 'model {{ ... }}' message: it is not an OD API "
                        "pipeline.config.", path)
        model = models[0]
        kinds = [k for k in ("ssd", "faster_rcnn", "rfcn", "center_net") if k in model]
        if len(kinds) != 1:
            raise Error("The pipeline config '{}' names no meta-architecture (model {{ ssd {{ ... }} }} or model "
                        "{{ faster_rcnn {{ ... }} }}).", path)
        self.meta_architecture = kinds[0]
        self.model = model[kinds[0]][0]

    # --- access -----------------------------------------------------------------------------
    def get(self, dotted: str, default=None):
        """The value at 'a.b.c' (first of repeated fields), or default."""
        node = self.model
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part][0]
        return node

    def get_all(self, dotted: str) -> list:
        parent, _, last = dotted.rpartition(".")
        node = self.get(parent) if parent else self.model
        return list(node.get(last, [])) if isinstance(node, dict) else []

    def number(self, dotted: str, default, kind=float):
        value = self.get(dotted, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not math.isfinite(value)):
            raise Error("The pipeline config '{}': {} must be a{} number, got {!r}.", self.path, dotted,
                        "n integer" if kind is int else "", value)
        return kind(value)

    # --- the values the replacers use -----------------------------------------------------------
    def resizer(self) -> dict:
        """{'kind': 'fixed_shape', 'height', 'width'} or {'kind': 'keep_aspect_ratio', 'min', 'max', 'pad'}."""
        if self.get("image_resizer.fixed_shape_resizer") is not None:
            base = "image_resizer.fixed_shape_resizer."
            return {"kind": "fixed_shape", "height": self._size(base + "height", 300),
                    "width": self._size(base + "width", 300)}
        if self.get("image_resizer.keep_aspect_ratio_resizer") is not None:
            base = "image_resizer.keep_aspect_ratio_resizer."
            return {"kind": "keep_aspect_ratio", "min": self._size(base + "min_dimension", 600),
                    "max": self._size(base + "max_dimension", 1024),
                    "pad": bool(self.get(base + "pad_to_max_dimension", False))}
        raise Error("The pipeline config '{}' has no image_resizer with fixed_shape_resizer or "
                    "keep_aspect_ratio_resizer: mo-core converts OD API models with those resizers.", self.path)

    def _size(self, dotted: str, default: int) -> int:
        """An image size of the resizer: 1 to 2^16 pixels (the IR's input is made of it)."""
        value = self.number(dotted, default, int)
        if not 0 < value <= 1 << 16:
            raise Error("The pipeline config '{}': {} must be 1 to 65536 pixels, got {}.", self.path, dotted, value)
        return value

    def box_coder_variances(self, prefix: str = "box_coder.faster_rcnn_box_coder.") -> list[float]:
        """1/scale of the Faster R-CNN box coder, x first: [1/x, 1/y, 1/w, 1/h] (DetectionOutput's order)."""
        y = self.number(prefix + "y_scale", 10.0)
        x = self.number(prefix + "x_scale", 10.0)
        h = self.number(prefix + "height_scale", 5.0)
        w = self.number(prefix + "width_scale", 5.0)
        for name, value in (("y_scale", y), ("x_scale", x), ("height_scale", h), ("width_scale", w)):
            if value <= 0:
                raise Error("The pipeline config '{}': box coder {} must be positive, got {}.", self.path, name,
                            value)
        return [1.0 / x, 1.0 / y, 1.0 / w, 1.0 / h]

    def nms(self, prefix: str = "post_processing.") -> dict:
        base = prefix + "batch_non_max_suppression."
        return {"score_threshold": self.number(base + "score_threshold", 0.0),
                "iou_threshold": self.number(base + "iou_threshold", 0.6),
                "max_detections_per_class": self.number(base + "max_detections_per_class", 100, int),
                "max_total_detections": self.number(base + "max_total_detections", 100, int),
                "score_converter": str(self.get(prefix + "score_converter", "IDENTITY")),
                "logit_scale": self.number(prefix + "logit_scale", 1.0)}

    def num_classes(self) -> int:
        value = self.number("num_classes", 0, int)
        if value <= 0:
            raise Error("The pipeline config '{}' has no positive num_classes.", self.path)
        return value
