"""What `mo-core extgen` generates: the configuration (config.extgen.json, or the
answers of the interactive mode, which become the same dictionary), checked.

    {"output_dir": "ext",                        default: the current directory
     "mo_op": true, "mo_caffe_ext": true, "mo_tf_ext": false, "ie_cpu_ext": true, "ie_gpu_ext": true,
     "one_file": false,                          extractor(s) + op + CPU kernel in one Python file
     "op":    {"name": "HardSigmoid", "changes_shape": false,
               "attrs": [["alpha", "float", "0.2"], ["beta", "float", "0.5"]]},   name, type[, default]
     "caffe": {"layer": "HardSigmoid", "pythonic": false, "module": "",            pythonic: module + layer
               "param_field": "hardsigmoid_param", "all_params": false,
               "params": [["alpha", "alpha", "float"], ...], "op": "HardSigmoid"},  field, IR name, type
     "tf":    {"layer": "Pooling", "op": "MaxPool", "all_params": false,
               "params": [["ksize", "window", "list.i"], ["data_format", "layout", ""]],  attr, name, type
               "op_class": "", "op_import": ""},  empty: the op registered under `op`
     "cpu":   {"name": "HardSigmoid", "params": [["alpha", "float"], ["beta", "float"]]},
     "gpu":   {"name": "HardSigmoid", "params": [["alpha", "float"], ["beta", "float"]], "inputs": 1}}

A section is needed when its component is on (op for mo_op, caffe for mo_caffe_ext,
tf for mo_tf_ext, cpu for ie_cpu_ext, gpu for ie_gpu_ext). Every problem is an
[ ERROR ] naming the key.
"""
from __future__ import annotations

import json
import keyword
import math
import os
import re
from dataclasses import dataclass, field

from core.errors import Error

COMPONENTS = ("mo_op", "mo_caffe_ext", "mo_tf_ext", "ie_cpu_ext", "ie_gpu_ext")
TYPES = ("int", "float", "bool", "string", "listint", "listfloat")          # op attributes, Caffe, CPU
GPU_TYPES = ("int", "float", "listint", "listfloat")                          # OpenCL defines
TF_TYPES = ("s", "i", "f", "b", "type", "shape", "padding", "spatial", "channel", "batch",
            "list.s", "list.i", "list.f", "list.b", "list.type", "list.shape")
MAX_CONFIG_BYTES = 1 << 20
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_ATTRS = {"type", "op", "infer"}  # every generated op sets these itself (extgen_render.render_op)
MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass
class OpSpec:
    name: str
    changes_shape: bool
    attrs: list = field(default_factory=list)      # (name, type, default text or None)


@dataclass
class CaffeSpec:
    layer: str
    pythonic: bool
    module: str
    param_field: str
    all_params: bool
    params: list                                   # (field, IR name, type)
    op: str


@dataclass
class TFSpec:
    layer: str
    op: str
    all_params: bool
    params: list                                   # (attr, IR name, type or "")
    op_class: str
    op_import: str


@dataclass
class KernelSpec:
    name: str
    params: list                                   # (name, type)
    inputs: int = 1


@dataclass
class ExtgenSpec:
    output_dir: str
    one_file: bool
    op: OpSpec | None = None
    caffe: CaffeSpec | None = None
    tf: TFSpec | None = None
    cpu: KernelSpec | None = None
    gpu: KernelSpec | None = None


class _Reader:
    def __init__(self, where: str):
        self.where = where

    def fail(self, key: str, problem: str) -> Error:
        return Error("extgen configuration {}: '{}' {}.", self.where, key, problem)

    def get(self, section: dict, key: str, kind, path: str, default=None, required=True):
        if key not in section:
            if required:
                raise self.fail(path + key, "is missing")
            return default
        value = section[key]
        if kind is bool and not isinstance(value, bool):
            raise self.fail(path + key, "must be true or false")
        if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
            raise self.fail(path + key, "must be an integer")
        if kind is str and not isinstance(value, str):
            raise self.fail(path + key, "must be a string")
        if kind is list and not isinstance(value, list):
            raise self.fail(path + key, "must be a list")
        if kind is dict and not isinstance(value, dict):
            raise self.fail(path + key, "must be an object")
        return value

    def name(self, value: str, key: str, pattern=IDENT):
        if not pattern.match(value or ""):
            raise self.fail(key, "must be a name of letters, digits and underscores (not starting with a digit), "
                                 "got {!r}".format(value))
        taken = [part for part in value.split(".") if keyword.iskeyword(part)]
        if taken:  # (the generated code would not compile: `lambda=0.2`, `self.None`)
            raise self.fail(key, "{!r} is a Python keyword, which the generated code cannot use as a name; "
                                 "choose another".format(taken[0]))
        return value

    def rows(self, section: dict, key: str, path: str, sizes, types, type_column: int, optional_type=False,
             op_attrs=True):
        """`op_attrs`: the rows name attributes of the op (not the names the reserved ones)."""
        rows = self.get(section, key, list, path, default=[], required=False)
        result = []
        for i, row in enumerate(rows):
            where = "{}{}[{}]".format(path, key, i)
            if not isinstance(row, list) or len(row) not in sizes or not all(isinstance(v, str) for v in row):
                raise self.fail(where, "must be a list of {} strings".format(" or ".join(map(str, sizes))))
            self.name(row[0], where)
            if type_column == 2:
                self.name(row[1], where)
            attr = row[1] if type_column == 2 else row[0]
            if op_attrs and attr in RESERVED_ATTRS:
                raise self.fail(where, "names the attribute {!r}, which every op has already ({}); choose another "
                                       "name".format(attr, ", ".join(sorted(RESERVED_ATTRS))))
            kind = row[type_column] if len(row) > type_column else ""
            if kind not in types and not (optional_type and kind == ""):
                raise self.fail(where, "has type {!r}; the types are {}".format(kind, ", ".join(types)))
            result.append(tuple(row) + (None,) * (max(sizes) - len(row)))
        names = [r[1] if type_column == 2 else r[0] for r in result]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise self.fail(path + key, "names {} twice".format(dup[0]))
        return result


def parse_spec(config: dict, where: str) -> ExtgenSpec:
    r = _Reader(where)
    if not isinstance(config, dict):
        raise Error("extgen configuration {} must be a JSON object (see cli/config.extgen.json.example).", where)
    unknown = sorted(set(config) - set(COMPONENTS) - {"output_dir", "one_file", "op", "caffe", "tf", "cpu", "gpu"})
    if unknown:
        raise r.fail(unknown[0], "is not a key extgen knows (see cli/config.extgen.json.example)")
    on = {c: r.get(config, c, bool, "", default=False, required=False) for c in COMPONENTS}
    if not any(on.values()):
        raise Error("extgen configuration {} turns no component on: set one or more of {} to true.", where,
                    ", ".join(COMPONENTS))
    spec = ExtgenSpec(output_dir=r.get(config, "output_dir", str, "", default=".", required=False) or ".",
                      one_file=r.get(config, "one_file", bool, "", default=False, required=False))
    if on["mo_op"]:
        s = r.get(config, "op", dict, "")
        attrs = r.rows(s, "attrs", "op.", (2, 3), TYPES, 1)
        for name, kind, default in attrs:
            if default is not None:
                python_literal(kind, default, lambda problem, n=name: r.fail("op.attrs", "{}: {}".format(n, problem)))
        spec.op = OpSpec(r.name(r.get(s, "name", str, "op."), "op.name"),
                         r.get(s, "changes_shape", bool, "op."), attrs)
    if on["mo_caffe_ext"]:
        s = r.get(config, "caffe", dict, "")
        pythonic = r.get(s, "pythonic", bool, "caffe.", default=False, required=False)
        module = r.get(s, "module", str, "caffe.", default="", required=pythonic)
        if pythonic:
            r.name(module, "caffe.module", MODULE)
        param_field = r.get(s, "param_field", str, "caffe.", default="", required=False)
        if param_field and not pythonic:
            r.name(param_field, "caffe.param_field")
        layer = r.name(r.get(s, "layer", str, "caffe."), "caffe.layer")
        spec.caffe = CaffeSpec(layer, pythonic, module, param_field,
                               r.get(s, "all_params", bool, "caffe.", default=False, required=False),
                               r.rows(s, "params", "caffe.", (3,), TYPES, 2),
                               r.name(r.get(s, "op", str, "caffe.", default=layer, required=False) or layer,
                                      "caffe.op"))
        if (spec.caffe.params or spec.caffe.all_params) and not (param_field or pythonic):
            raise r.fail("caffe.param_field", "is needed to read parameters (the layer's *_param field)")
    if on["mo_tf_ext"]:
        s = r.get(config, "tf", dict, "")
        op_class = r.get(s, "op_class", str, "tf.", default="", required=False)
        op_import = r.get(s, "op_import", str, "tf.", default="", required=bool(op_class))
        if op_class:
            r.name(op_class, "tf.op_class")
            r.name(op_import, "tf.op_import", MODULE)
        spec.tf = TFSpec(r.name(r.get(s, "layer", str, "tf."), "tf.layer"), r.name(r.get(s, "op", str, "tf."), "tf.op"),
                         r.get(s, "all_params", bool, "tf.", default=False, required=False),
                         r.rows(s, "params", "tf.", (2, 3), TF_TYPES, 2, optional_type=True), op_class, op_import)
    for component, key, types in (("ie_cpu_ext", "cpu", TYPES), ("ie_gpu_ext", "gpu", GPU_TYPES)):
        if on[component]:
            s = r.get(config, key, dict, "")
            inputs = r.get(s, "inputs", int, key + ".", default=1, required=False)
            if not 1 <= inputs <= 8:
                raise r.fail(key + ".inputs", "must be 1 to 8")
            setattr(spec, key, KernelSpec(r.name(r.get(s, "name", str, key + "."), key + ".name"),
                                          r.rows(s, "params", key + ".", (2,), types, 1, op_attrs=False), inputs))
    if spec.one_file and not (spec.op and (spec.caffe or spec.tf) and spec.cpu):
        raise r.fail("one_file", "puts an extractor, its op and the CPU kernel in one file: turn on mo_op, "
                                 "mo_caffe_ext or mo_tf_ext, and ie_cpu_ext")
    return spec


def python_literal(kind: str, text: str, fail=None):
    """The Python value of an attribute default given as text (`"0.2"`, `"1,2"`, `"true"`)."""
    def bad(problem):
        if fail is None:
            raise ValueError(problem)
        raise fail(problem)
    text = text.strip()
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            value = float(text)
            if not math.isfinite(value):
                bad("a float default must be a finite number, got {!r}".format(text))
            return value
        if kind == "bool":
            if text.lower() not in ("true", "false", "1", "0"):
                bad("a bool default is true or false, got {!r}".format(text))
            return text.lower() in ("true", "1")
        if kind == "string":
            return text
        items = [t for t in text.replace(" ", "").split(",") if t]
        if kind == "listint":
            return [int(t) for t in items]
        values = [float(t) for t in items]
        if not all(math.isfinite(v) for v in values):
            bad("a float default must hold finite numbers, got {!r}".format(text))
        return values
    except ValueError:
        bad("{!r} is not a {} value".format(text, kind))


def load_config(path: str) -> ExtgenSpec:
    if not os.path.isfile(path):
        raise Error("The extgen configuration file '{}' does not exist. Run `mo-core extgen new ...` for the "
                    "interactive mode, or copy cli/config.extgen.json.example.", path)
    if os.path.getsize(path) > MAX_CONFIG_BYTES:
        raise Error("The extgen configuration file '{}' is larger than {} bytes.", path, MAX_CONFIG_BYTES)
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Error("The extgen configuration file '{}' is not valid JSON: {}.", path, exc) from None
    except RecursionError:
        raise Error("The extgen configuration file '{}' is nested too deeply.", path) from None
    return parse_spec(config, "'{}'".format(path))
