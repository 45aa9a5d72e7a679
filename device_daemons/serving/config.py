"""A model's optional config.json in the repository (`<model>/config.json`), read
strictly: an unknown key or a value of the wrong kind is an error naming the file
and the key.

    {"device": "CPU",                        # or GPU, GPU.1, HETERO:GPU,CPU
     "max_batch_size": 8,                    # 0 (default): inputs have exactly the IR's shapes;
                                             # N: a leading batch dim of 1..N (shape -1 in metadata)
     "batch_sizes": [1, 4, 8],               # networks loaded per batch size (default: 1, 2, 4, .. N);
                                             # a request runs on the smallest that holds it, padded
     "dynamic_batching": {"max_queue_delay_microseconds": 500},   # merge concurrent requests
     "instance_count": 1,                    # batches in flight at once (dynamic batching)
     "inputs": [{"name": "image", "ir_name": "data", "datatype": "UINT8"}],   # rename / retype
     "outputs": [{"name": "scores", "ir_name": "prob"}],
     "versions": "latest",                   # "latest" (default), "all", or [1, 3]
     "convert_args": ["--mean_values", "data[104,117,123]"],   # Caffe/TF models converted on load
     "plugin_config": {"INFERENCE_PRECISION_HINT": "f32"},      # the device's load config (as OpenVINO
                                                                # Model Server's): load_network's config
     "replicas": 2,                          # Ray mode: or {"min": 1, "max": 4, "target_ongoing_requests": 2}
     "resources": {"num_cpus": 1, "num_gpus": 0}}               # Ray mode: per replica
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from core.convert_options import OPTIONS
from core.errors import Error

from .tensors import DATATYPES

MAX_CONFIG_BYTES = 64 * 1024
MAX_BATCH = 1024


@dataclass(frozen=True)
class TensorConfig:
    name: str  # the protocol's name
    ir_name: str  # the IR's (input layer / output as the daemon names it)
    datatype: str | None = None  # None: FP32


@dataclass(frozen=True)
class Autoscaling:
    min: int
    max: int
    target_ongoing_requests: float


@dataclass(frozen=True)
class ModelConfig:
    device: str = "CPU"
    max_batch_size: int = 0
    batch_sizes: tuple = ()
    max_queue_delay_us: int | None = None  # None: no dynamic batching
    instance_count: int = 1
    inputs: tuple = ()
    outputs: tuple = ()
    versions: object = "latest"
    convert_args: tuple = ()
    plugin_config: tuple = ()  # (key, value) pairs of load_network's config
    replicas: int | Autoscaling = 1
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    source: str | None = None  # the file it was read from
    raw: dict = field(default_factory=dict, compare=False)

    @property
    def dynamic_batching(self) -> bool:
        return self.max_queue_delay_us is not None

    def loaded_batches(self) -> tuple:
        """The batch sizes networks are loaded at."""
        if self.max_batch_size == 0:
            return (0,)  # (the IR's own shapes)
        if self.batch_sizes:
            return self.batch_sizes
        sizes, b = [], 1
        while b < self.max_batch_size:
            sizes.append(b)
            b *= 2
        return tuple(sizes + [self.max_batch_size])


def _fail(where: str, message: str) -> Error:
    return Error("{}: {}", where, message)


def _int(value, where: str, key: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _fail(where, f"'{key}' must be an integer from {low} to {high}, got {value!r}")
    return value


def _number(value, where: str, key: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise _fail(where, f"'{key}' must be a number from {low} to {high}, got {value!r}")
    return float(value)


def _keys(obj, where: str, key: str, allowed: tuple) -> dict:
    if not isinstance(obj, dict):
        raise _fail(where, f"'{key}' must be an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise _fail(where, f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} in "
                           f"'{key}' (known: {', '.join(allowed)})")
    return obj


def _tensors(items, where: str, key: str) -> tuple:
    if not isinstance(items, list):
        raise _fail(where, f"'{key}' must be a list of {{\"name\", \"ir_name\", \"datatype\"}} objects")
    out = []
    for i, item in enumerate(items):
        _keys(item, where, f"{key}[{i}]", ("name", "ir_name", "datatype"))
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(where, f"'{key}[{i}].name' must be a non-empty string")
        ir_name = item.get("ir_name", name)
        if not isinstance(ir_name, str) or not ir_name:
            raise _fail(where, f"'{key}[{i}].ir_name' must be a non-empty string")
        datatype = item.get("datatype")
        if datatype is not None and (datatype not in DATATYPES):
            raise _fail(where, f"'{key}[{i}].datatype' must be one of {', '.join(DATATYPES)}, got {datatype!r}")
        for field_name, value in (("name", name), ("ir_name", ir_name)):
            if any(getattr(t, field_name) == value for t in out):
                raise _fail(where, f"'{key}[{i}].{field_name}' {value!r} is given twice in '{key}'; each tensor once")
        out.append(TensorConfig(name, ir_name, datatype))
    return tuple(out)


# the convert options the repository gives itself: which files, where the IR goes and its name
_REPOSITORY_OPTIONS = ("input_model", "input_proto", "saved_model_dir", "input_meta_graph", "input_checkpoint",
                       "output_dir", "model_name")
_SPELLED = {s: o.name for o in OPTIONS for s in o.spellings}  # every convert option's spellings


def _repository_option(arg: str) -> str | None:
    """The repository-set option `arg` spells (exactly, or as the converter's argparse takes an
    unambiguous prefix of a long option), else None."""
    word = arg.split("=", 1)[0]
    if not word.startswith("-"):
        return None
    if word in _SPELLED:
        return _SPELLED[word] if _SPELLED[word] in _REPOSITORY_OPTIONS else None
    if word.startswith("--"):
        matches = {name for s, name in _SPELLED.items() if s.startswith(word)}
        if len(matches) == 1 and matches <= set(_REPOSITORY_OPTIONS):
            return matches.pop()
    return None


def parse_config(raw: dict, where: str) -> ModelConfig:
    _keys(raw, where, "config", ("device", "max_batch_size", "batch_sizes", "dynamic_batching",
                                 "instance_count", "inputs", "outputs", "versions", "convert_args",
                                 "plugin_config", "replicas", "resources"))
    kw: dict = {"source": where, "raw": raw}
    if "device" in raw:
        if not isinstance(raw["device"], str) or not raw["device"].strip():
            raise _fail(where, f"'device' must be a device name such as CPU, GPU or HETERO:GPU,CPU, "
                               f"got {raw['device']!r}")
        kw["device"] = raw["device"].strip()
    max_batch = kw["max_batch_size"] = _int(raw.get("max_batch_size", 0), where, "max_batch_size", 0, MAX_BATCH)
    if "batch_sizes" in raw:
        sizes = raw["batch_sizes"]
        if max_batch == 0:
            raise _fail(where, "'batch_sizes' needs 'max_batch_size' > 0")
        if not isinstance(sizes, list) or not sizes:
            raise _fail(where, "'batch_sizes' must be a non-empty list of integers")
        sizes = sorted({_int(s, where, "batch_sizes", 1, max_batch) for s in sizes})
        if sizes[-1] != max_batch:
            sizes.append(max_batch)  # a full batch must have a network
        kw["batch_sizes"] = tuple(sizes)
    if "dynamic_batching" in raw:
        db = _keys(raw["dynamic_batching"], where, "dynamic_batching", ("max_queue_delay_microseconds",))
        if max_batch == 0:
            raise _fail(where, "'dynamic_batching' needs 'max_batch_size' > 0 (the largest merged batch)")
        kw["max_queue_delay_us"] = _int(db.get("max_queue_delay_microseconds", 0), where,
                                        "dynamic_batching.max_queue_delay_microseconds", 0, 10_000_000)
    if "instance_count" in raw:
        kw["instance_count"] = _int(raw["instance_count"], where, "instance_count", 1, 64)
    kw["inputs"] = _tensors(raw.get("inputs", []), where, "inputs")
    kw["outputs"] = _tensors(raw.get("outputs", []), where, "outputs")
    versions = raw.get("versions", "latest")
    if versions not in ("latest", "all"):
        if not isinstance(versions, list) or not versions:
            raise _fail(where, f"'versions' must be \"latest\", \"all\" or a list of version numbers, got {versions!r}")
        versions = tuple(sorted({_int(v, where, "versions", 1, 2 ** 62) for v in versions}))
    kw["versions"] = versions
    args = raw.get("convert_args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise _fail(where, "'convert_args' must be a list of strings (mo-core convert options)")
    for arg in args:
        taken = _repository_option(arg)
        if taken:
            raise _fail(where, f"'convert_args' may not give {arg.split('=')[0]} (--{taken}): the repository "
                               f"sets it (the model's files, the conversion cache)")
    kw["convert_args"] = tuple(args)
    plugin = raw.get("plugin_config", {})
    if not isinstance(plugin, dict) or not all(
            isinstance(k, str) and (isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)))
            for k, v in plugin.items()):
        raise _fail(where, "'plugin_config' must be an object of device settings, e.g. "
                           "{\"INFERENCE_PRECISION_HINT\": \"f32\"}")
    kw["plugin_config"] = tuple(sorted(plugin.items()))
    replicas = raw.get("replicas", 1)
    if isinstance(replicas, dict):
        _keys(replicas, where, "replicas", ("min", "max", "target_ongoing_requests"))
        low = _int(replicas.get("min", 1), where, "replicas.min", 0, 1000)
        high = _int(replicas.get("max", max(low, 1)), where, "replicas.max", max(low, 1), 1000)
        target = _number(replicas.get("target_ongoing_requests", 2), where, "replicas.target_ongoing_requests",
                         0.1, 10000)
        kw["replicas"] = Autoscaling(low, high, target)
    else:
        kw["replicas"] = _int(replicas, where, "replicas", 1, 1000)
    res = _keys(raw.get("resources", {}), where, "resources", ("num_cpus", "num_gpus"))
    kw["num_cpus"] = _number(res.get("num_cpus", 1), where, "resources.num_cpus", 0, 1024)
    kw["num_gpus"] = _number(res.get("num_gpus", 0), where, "resources.num_gpus", 0, 64)
    return ModelConfig(**kw)


def read_config(model_dir: str) -> ModelConfig:
    """`<model_dir>/config.json`, or the defaults when there is none."""
    path = os.path.join(model_dir, "config.json")
    if not os.path.lexists(path):
        return ModelConfig()
    if not os.path.isfile(path):
        raise Error("{} is not a regular file", path)
    with open(path, "rb") as f:
        data = f.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise Error("{} is larger than {} KiB; a model config is a small JSON object", path, MAX_CONFIG_BYTES // 1024)
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise Error("{} is not valid JSON: {}", path, exc) from None
    return parse_config(raw, path)
