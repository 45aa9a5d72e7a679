"""The contract of the inference daemons (the CPU and the GPU daemon, both over
device_daemons/service/): each verb's name, what its arguments must be and what
its result holds, written once and used on both sides. The daemon parses every
request with the parse_* functions (anything wrong is a RemoteError of the kind
named below, sent back as the error reply); the client builds its requests with
the *_request functions and checks each reply with the check_* functions (a
daemon that breaks the contract is a ProtocolError there).

Verbs (arrays travel as raw frames; "$array" references in args/results):

  load_network {xml, bin? | xml_text, bin_data (1-D uint8 array); kernels?: [path],
               batch?: int, shapes?: {input: dims}, outputs?: [layer name],
               config?: {key: str | int}}
      -> {handle, name, inputs: {name: {shape, precision}}, outputs: {...}, cached,
          warnings: [str], config?: {key: str | int}}
      (kernels: the device's extension files - CPU kernel .py, GPU custom layer
      .xml; outputs: layers whose outputs are returned too, IE's add_outputs;
      config: the device's load settings, OpenVINO's keys - the CPU takes
      INFERENCE_PRECISION_HINT and INFERENCE_NUM_THREADS - and in the reply what the
      network got, with OPTIMAL_NUMBER_OF_INFER_REQUESTS)
  query_network {xml, bin? | xml_text, bin_data; kernels?: [path]}
      -> {supported: {layer name: device}}   (IE's QueryNetwork; HETERO's affinity)
  infer        {handle, inputs: {name: float32 array}, perf?: bool}
      -> {outputs: {name: array}, compute_us, perf?: [{name, type, backend, status, ms, precision?,
          note?}]}
      (perf: per-layer times of this request (IE's PERF_COUNT, `-pc`): a row per step
      in execution order, `backend` what ran it (device-specific: "onednn", "numpy",
      "opencl", ...), `status` one of PERF_STATUSES - "executed" rows have their own
      time, "fused" ones ran inside another step, "not_run" ones computed nothing)
  reshape      {handle, shapes: {input: dims}} -> like load_network (same handle)
  unload       {handle} -> {}
  add_extension {path, check_only?: bool} -> {path, types: [str]}
  status       {} -> {device, pid, started, uptime, endpoint, version, threads,
                      requests, local_requests, networks: [...], cached_plans,
                      extensions, shm_slots, bindings}
  shm_create   {size, pid?} -> {slot, path, name};  shm_detach {slot} -> {}
               (pid: the client's; its slots go once it ends)
  infer_bind   {handle, shm} -> {binding, outputs: bytes (placed spec)}   (the local
               carrier only; then the raw verb RAW_INFER: bound_protocol.py)
plus the microkernel's built-in hello / ping / shutdown.

The shm spec of infer_bind is msgpack bytes of {slot, inputs: {name: [offset,
shape]}, out: [offset, capacity]}, the placed spec of its reply {name: [offset,
shape]} (the layout: shm_protocol.py); both are decoded with the protocol's limits.

Error kinds: "network" (the IR cannot be read or compiled, e.g. a layer type
without a kernel), "kernel" (a custom kernel file is bad or a kernel failed),
"input" (bad input name, shape or dtype), "handle" (unknown handle: the daemon
was restarted; the client loads again), "shm" (a bad or dropped slot: the client
uses frames).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.microkernel import ProtocolError, RemoteError

from .shm_protocol import tensor_span, unpack_spec

# verbs
LOAD_NETWORK = "load_network"
INFER = "infer"
RESHAPE = "reshape"
UNLOAD = "unload"
ADD_EXTENSION = "add_extension"
QUERY_NETWORK = "query_network"
STATUS = "status"
SHM_CREATE = "shm_create"
SHM_DETACH = "shm_detach"

# error kinds
NETWORK = "network"
KERNEL = "kernel"
INPUT = "input"
HANDLE = "handle"
SHM = "shm"

MAX_RANK = 8
# The largest tensor (elements) a daemon computes or a client generates: 8 GiB of
# float32. An IR or a reshape may declare anything up to 2^64 per dim.
MAX_TENSOR_ELEMENTS = 1 << 31
MAX_INPUTS = 1024
MAX_PATH = 4096
MAX_EXTRA_OUTPUTS = 100000
MAX_PERF_ROWS = 1 << 20
MAX_CONFIG = 64
PERF_STATUSES = ("executed", "fused", "not_run")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- pieces

def shape(value, where: str, kind: str = INPUT) -> tuple:
    """1 to MAX_RANK positive ints with at most MAX_TENSOR_ELEMENTS elements."""
    if not isinstance(value, (list, tuple)) or not 0 < len(value) <= MAX_RANK or not all(
            _is_int(d) and d > 0 for d in value):
        raise RemoteError(kind, f"{where} must be a list of 1 to {MAX_RANK} positive integers, "
                                f"got {value!r:.80}")
    n = math.prod(value)
    if n > MAX_TENSOR_ELEMENTS:
        raise RemoteError(kind, f"{where} {list(value)!r:.80} has {n} elements, more than the "
                                f"daemon's limit of {MAX_TENSOR_ELEMENTS}")
    return tuple(value)


def shapes(value) -> dict[str, tuple] | None:
    """The optional {input name: dims} of load_network / reshape."""
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > MAX_INPUTS:
        raise RemoteError(INPUT, "'shapes' must be a map {input name: dims}")
    return {str(k): shape(v, f"the shape of input {k!r:.80}") for k, v in value.items()} or None


def handle(args: dict) -> int:
    """The handle a request names (whether the daemon knows it is its own business)."""
    value = args.get("handle")
    if not _is_int(value):
        raise RemoteError(HANDLE, f"'handle' must be the integer load_network returned, got {value!r:.40}")
    return value


def _path(value, what: str, kind: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_PATH or "\0" in value:
        raise RemoteError(kind, f"{what} must be a file path, got {value!r:.80}")
    return value


# --------------------------------------------------------------------------- load_network

@dataclass
class LoadArgs:
    xml: str | None = None  # paths on the daemon's machine ...
    bin: str | None = None
    xml_text: bytes | None = None  # ... or the IR itself
    bin_data: np.ndarray | None = None
    kernels: tuple = ()
    batch: int | None = None
    shapes: dict | None = None
    outputs: tuple = ()
    config: dict | None = None
    owner: int | None = None  # the loading client's pid (a local one): its end unloads the network


def load_request(*, xml: str | None = None, bin: str | None = None, xml_text: bytes | None = None,
                 bin_data: np.ndarray | None = None, kernels=(), batch: int | None = None,
                 shapes: dict | None = None, outputs=(), config: dict | None = None,
                 owner: int | None = None) -> dict:
    """The args of load_network (client side; query_network takes the same IR and
    kernels)."""
    args: dict = {"xml": xml, "bin": bin} if xml is not None else {"xml_text": xml_text, "bin_data": bin_data}
    if kernels:
        args["kernels"] = list(kernels)
    if batch is not None:
        args["batch"] = batch
    if shapes:
        args["shapes"] = {k: list(v) for k, v in shapes.items()}
    if outputs:
        args["outputs"] = list(outputs)
    if config:
        args["config"] = dict(config)
    if owner is not None:
        args["owner"] = owner
    return args


def config(value, kind: str = NETWORK) -> dict | None:
    """A load config or the config of a reply: {str key: str | int}."""
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > MAX_CONFIG or not all(
            isinstance(k, str) and len(k) <= 100 and (isinstance(v, str) and len(v) <= 100 or _is_int(v))
            for k, v in value.items()):
        raise RemoteError(kind, f"'config' must be a map {{key: string or integer}}, got {value!r:.80}")
    return dict(value) or None


def parse_load(args: dict) -> LoadArgs:
    out = LoadArgs()
    if args.get("xml") is not None:
        out.xml = _path(args["xml"], "'xml'", NETWORK)
        if args.get("bin") is not None:
            out.bin = _path(args["bin"], "'bin'", NETWORK)
    elif args.get("xml_text") is not None:
        text = args["xml_text"]
        out.xml_text = text.encode("utf-8") if isinstance(text, str) else text
        if not isinstance(out.xml_text, bytes):
            raise RemoteError(NETWORK, "'xml_text' must be the .xml content (str or bytes)")
        data = args.get("bin_data")
        data = np.zeros(0, np.uint8) if data is None else data
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
            raise RemoteError(NETWORK, "'bin_data' must be the .bin content as a 1-D uint8 array")
        out.bin_data = data
    else:
        raise RemoteError(NETWORK, "load_network needs 'xml' (+ 'bin') paths or 'xml_text' + 'bin_data'")
    kernels = args.get("kernels") or []
    if not isinstance(kernels, list) or len(kernels) > 64:
        raise RemoteError(KERNEL, "'kernels' must be a list of file paths")
    out.kernels = tuple(_path(p, "a custom kernel file", KERNEL) for p in kernels)
    batch = args.get("batch")
    if batch is not None and (not _is_int(batch) or not 0 < batch <= MAX_TENSOR_ELEMENTS):
        raise RemoteError(INPUT, f"batch must be a positive integer, got {batch!r:.40}")
    out.batch = batch
    out.shapes = shapes(args.get("shapes"))
    names = args.get("outputs") or []
    if not isinstance(names, list) or len(names) > MAX_EXTRA_OUTPUTS or not all(
            isinstance(n, str) and len(n) <= MAX_PATH for n in names):
        raise RemoteError(INPUT, "'outputs' must be a list of layer names")
    out.outputs = tuple(names)
    out.config = config(args.get("config"))
    owner = args.get("owner")
    if owner is not None and not (_is_int(owner) and 0 < owner < 1 << 22):
        raise RemoteError(NETWORK, f"'owner' must be a process id, got {owner!r:.40}")
    out.owner = owner
    return out


def check_query_result(result: dict) -> dict[str, str]:
    """The reply of query_network (client side): {layer name: device}."""
    supported = result.get("supported")
    if not isinstance(supported, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in supported.items()):
        raise ProtocolError("a query_network reply without 'supported': {layer name: device}")
    return dict(supported)


def network_result(handle_id: int, name: str, inputs: dict, outputs: dict, cached: bool,
                   warnings: list, settings: dict | None = None) -> dict:
    """The result of load_network / reshape (daemon side); settings: what the network
    got (the reply's config)."""
    result = {"handle": handle_id, "name": name, "inputs": inputs, "outputs": outputs, "cached": cached,
              "warnings": list(warnings)}
    if settings:
        result["config"] = dict(settings)
    return result


@dataclass
class LoadResult:
    handle: int
    name: str
    inputs: dict  # {name: [dims]}
    outputs: dict
    cached: bool
    warnings: list
    config: dict


def check_load_result(result: dict) -> LoadResult:
    """The reply of load_network / reshape (client side); ProtocolError if malformed."""
    try:
        ports = [{n: [int(d) for d in info["shape"]] for n, info in result[key].items()}
                 for key in ("inputs", "outputs")]
        out = LoadResult(result["handle"], str(result.get("name", "")), ports[0], ports[1],
                         bool(result.get("cached")), [str(w) for w in result.get("warnings") or []],
                         config(result.get("config")) or {})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProtocolError(f"a load_network reply without {exc}") from None
    except RemoteError as exc:
        raise ProtocolError(f"a load_network reply with a bad config: {exc}") from None
    if not _is_int(out.handle):
        raise ProtocolError(f"a load_network reply with the handle {out.handle!r:.40}")
    return out


# --------------------------------------------------------------------------- infer

@dataclass
class InferArgs:
    handle: int
    inputs: dict  # {name: array}
    perf: bool = False  # the reply brings per-layer times


def infer_request(handle_id: int, inputs: dict, *, perf: bool = False) -> dict:
    """The args of infer (client side)."""
    args = {"handle": handle_id, "inputs": inputs}
    if perf:
        args["perf"] = True
    return args


def parse_infer(args: dict) -> InferArgs:
    perf = args.get("perf", False)
    if not isinstance(perf, bool):
        raise RemoteError(INPUT, f"'perf' must be true or false, got {perf!r:.40}")
    hid = handle(args)
    inputs = args.get("inputs")
    if not isinstance(inputs, dict) or len(inputs) > MAX_INPUTS or not all(
            isinstance(v, np.ndarray) for v in inputs.values()):
        raise RemoteError(INPUT, "'inputs' must be a map {input name: array}")
    return InferArgs(hid, inputs, perf)


def parse_shm(packed) -> dict:
    """The shm spec of an infer_bind request, decoded with the protocol's limits and
    checked: {slot, inputs: {name: (offset, shape, bytes)}, out: (offset, capacity)}."""
    try:
        spec = unpack_spec(packed, "shm")
        if not isinstance(spec, dict) or not _is_int(spec.get("slot")) or not isinstance(spec.get("inputs"), dict) \
                or len(spec["inputs"]) > MAX_INPUTS:
            raise ProtocolError("'shm' must be {slot, inputs: {name: [offset, shape]}, out: [offset, capacity]}")
        inputs = {}
        for name, item in spec["inputs"].items():
            if not isinstance(item, list) or len(item) != 2:
                raise ProtocolError(f"input {name!r:.80}: expected [offset, shape]")
            inputs[name] = tensor_span(item[0], item[1], f"input {name!r:.80}")
        out = spec.get("out")
        if not isinstance(out, list) or len(out) != 2 or not all(_is_int(v) and v >= 0 for v in out):
            raise ProtocolError("'out' must be [offset, capacity]")
    except ProtocolError as exc:
        raise RemoteError(SHM, str(exc)) from None
    return {"slot": spec["slot"], "inputs": inputs, "out": (out[0], out[1])}


class PerfRow:
    """One row of an infer reply's `perf` (daemon side; what `-pc` prints): an IR
    layer's name and type, the backend that ran it, its status (PERF_STATUSES), time
    in ms (0 unless executed), and optionally the precision it computed in, a note
    (why a reorder is there, why a layer runs on the backend it does) and the backend's
    kernel (oneDNN's implementation, e.g. "brgconv:avx512_core": which instructions ran)."""
    __slots__ = ("name", "type", "backend", "status", "ms", "precision", "note", "kernel")

    def __init__(self, name: str, type_: str, backend: str, status: str, ms: float, precision: str = "",
                 note: str = "", kernel: str = ""):
        self.name, self.type, self.backend, self.status, self.ms = name, type_, backend, status, ms
        self.precision, self.note, self.kernel = precision, note, kernel

    def as_dict(self) -> dict:
        row = {"name": self.name, "type": self.type, "backend": self.backend, "status": self.status,
               "ms": float(self.ms)}
        if self.precision:
            row["precision"] = self.precision
        if self.note:
            row["note"] = self.note
        if self.kernel:
            row["kernel"] = self.kernel
        return row


def infer_result(outputs: dict, compute_us: int, perf: list | None = None) -> dict:
    """The result of infer (daemon side); perf: PerfRows when the request asked."""
    result = {"outputs": outputs, "compute_us": compute_us}
    if perf is not None:
        result["perf"] = [row.as_dict() for row in perf]
    return result


def check_perf(result: dict) -> list[dict] | None:
    """The `perf` rows of an infer reply (client side): None when it has none, else
    [{name, type, backend, status, ms}]; ProtocolError if malformed."""
    rows = result.get("perf")
    if rows is None:
        return None
    if not isinstance(rows, list) or len(rows) > MAX_PERF_ROWS:
        raise ProtocolError(f"'perf' must be a list of at most {MAX_PERF_ROWS} rows")
    checked = []
    for row in rows:
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) and len(row[k]) <= MAX_PATH
                                                for k in ("name", "type", "backend", "status")):
            raise ProtocolError(f"a 'perf' row must be {{name, type, backend, status: str, ms}}, got {row!r:.120}")
        ms = row.get("ms")
        if row["status"] not in PERF_STATUSES or isinstance(ms, bool) or not isinstance(ms, (int, float)) \
                or not 0 <= ms < math.inf:
            raise ProtocolError(f"a 'perf' row with status {row['status']!r:.40} and ms {ms!r:.40} (the statuses "
                                f"are {', '.join(PERF_STATUSES)}; ms a time >= 0)")
        extra = {k: row[k] for k in ("precision", "note", "kernel") if k in row}
        if not all(isinstance(v, str) and len(v) <= MAX_PATH for v in extra.values()):
            raise ProtocolError(f"a 'perf' row's precision, note and kernel must be strings, got {row!r:.120}")
        checked.append({k: row[k] for k in ("name", "type", "backend", "status")} | {"ms": float(ms)} | extra)
    return checked


def check_infer_result(result: dict) -> dict:
    """The outputs (arrays) of an infer reply; ProtocolError if malformed."""
    outputs = result.get("outputs")
    if not isinstance(outputs, dict) or not all(isinstance(v, np.ndarray) for v in outputs.values()):
        raise ProtocolError("an infer reply without outputs")
    return outputs


# --------------------------------------------------------------------------- the rest

def parse_add_extension(args: dict) -> tuple[str, bool]:
    return _path(args.get("path"), "a custom kernel file", KERNEL), bool(args.get("check_only"))


def parse_shm_create(args: dict) -> tuple[int, int | None]:
    """(size, the client's pid or None)."""
    size = args.get("size")
    if not _is_int(size):
        raise RemoteError(SHM, f"'size' must be an integer, got {size!r:.40}")
    pid = args.get("pid")
    if pid is not None and not (_is_int(pid) and 0 < pid < 1 << 22):
        raise RemoteError(SHM, f"'pid' must be a process id, got {pid!r:.40}")
    return size, pid


def parse_shm_detach(args: dict) -> int | None:
    slot = args.get("slot")
    return slot if _is_int(slot) else None
