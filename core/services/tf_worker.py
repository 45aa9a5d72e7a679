"""The contract of the TensorFlow worker: how it is launched, its verbs, what their
arguments must be and what their results hold, written once and used by the
worker (fallback_workers/tf_worker/service.py) and by its clients: the
converter's TensorFlow front end (core/front/tf/freeze.py, the shape-inference
fallback core/front/tf/fallback.py, `convert --validate` core/validate.py) and
the CPU daemon's TFCustomSubgraphCall kernel (device_daemons/cpu/tf_backed.py).
Pure Python: importing it loads no TensorFlow.

Launch (core/microkernel: WorkerProcess over the launcher, in the OS sandbox of
core/microkernel/sandbox.py where the machine has one):
    <python> -m fallback_workers.tf_worker --endpoint EP --parent-pid PID
  <python> is MO_CORE_TF_PYTHON when set (a venv of its own with TensorFlow:
  it needs numpy, pyzmq and msgpack too), else the core's own interpreter.

What runs: every graph the worker is given (infer_subgraph, load_subgraph, and
what freeze would run: the outputs and variables of the model, its restore op and
its init/main ops, the SavedModel's functions) is checked against the allow-list
of core/services/tf_ops.py before TensorFlow imports or runs it; anything else is
kind "refused", naming each op and node. A restore op must read the checkpoint
through the saver's filename tensor (which the worker feeds with the checkpoint
the user named).

hello: the microkernel's, plus {"framework": {"name": "tensorflow", "available":
bool, "version": str|None, "error": str|None}}: a worker without TensorFlow still
starts and says so (fallback_workers/tf_worker/framework.py), and every verb then
fails with kind "framework_missing", whose message says how to install it (FAQ #41).

Convention: *_request builds a request (the client), parse_* validates one (the
worker: RemoteError "request"), check_* validates a reply (the client:
ProtocolError).

A graph travels as the bytes of a serialized GraphDef in the first array frame
(uint8), never inside the msgpack header; tensors as raw frames, never pickle.

Verbs:
  freeze {saved_model_dir: str|None, saved_model_tags: [str]|None, saved_model_signature: str|None,
          meta_graph: str|None, input_model: str|None, input_model_is_text: bool,
          checkpoint: str|None, outputs: [str]|None, output_path: str}
      -> {inputs: [names], outputs: [names], bytes: int}
      one of: a SavedModel directory (TF2 or TF1; the signature named, else its
      serving signature, or the only one), a TF1 meta graph with its checkpoint (default: the meta graph's
      path without ".meta"), or a GraphDef with variables (input_model) and a
      checkpoint. Variables become constants; the frozen GraphDef is written
      (binary) to output_path, a file in a private directory of the caller;
      `outputs` names the output nodes (else the signature's, or the nodes
      nothing reads).

  infer_subgraph {outputs: [tensor], given: [placeholder], seed: int,
                  max_value_elements: int} + arrays [graph, given arrays...]
      -> {outputs: [{shape: [int], dtype: str, constant: bool, value: bool}],
          ran: bool, fed: {placeholder: "given"|"noise"}} + arrays [values...]
      the output shapes of tensors of a graph whose Placeholders have the
      shapes to infer with: TensorFlow's own shape inference when it defines
      them all; else TensorFlow runs the graph once, feeding the `given`
      placeholders the arrays sent and every other one seeded noise (`ran`,
      `fed` say so: shapes that depend on the data come from that input). An
      output that depends on no Placeholder is `constant`; its value is sent
      back (`value`, one array each, in order) when it has at most
      max_value_elements elements and a numeric type.

  load_subgraph {id: str, inputs: [placeholder], outputs: [tensor]} + [graph]
      -> {id, inputs: [{name, dtype, shape}], outputs: [{name, dtype, shape}]}
      imports the graph once and keeps a callable for it under `id` (the
      caller's digest of the graph bytes, inputs and outputs: subgraph_id; a
      second load of a loaded id does nothing; at most MAX_SUBGRAPHS are kept,
      the least recently used go first). Shapes are TensorFlow's static ones
      (-1: unknown; null: unknown rank).
  run_subgraph {id: str} + arrays [one per input, in order]
      -> {} + arrays [one per output, in order]
  run_subgraph {id: str, shm: {buffer: {name, size}, inputs: [[offset,
                shape]], out: offset}}
      -> {placed: [[offset, shape]]}
      runs a loaded graph; kind "unknown_subgraph" when `id` is not loaded
      (the worker restarted, or evicted it): load it again and retry. With
      `shm`, the float32 inputs are read from, and the outputs written (as
      float32, from offset `out` on, each at a multiple of 64 bytes) to, a
      shared buffer the caller shared (RAW_SHARE, core/microkernel/
      shared_buffer.py): no tensor on the socket. Kind "unshared_buffer": no
      buffer of that name is mapped here (share it, retry); "shm": a tensor
      would end past it, or the outputs do not fit.
  RAW_SHARE (raw verb, the local carrier's Unix socket): SHARE_REQUEST (the buffer's
      size, then its name) with the buffer's memfd as SCM_RIGHTS -> RUN_REPLY
      RUN_OK, or kind "shm" (raw_failed) when the descriptor is not a sealed
      memfd of that name and size (at most MAX_SHARED_BYTES). The worker keeps
      at most MAX_SUBGRAPHS buffers / MAX_MAPPED_BYTES mapped, least recently
      used go first.
  bind_run {id, shm (as run_subgraph's), placed: [[offset, shape]]} -> {binding}
      binds runs of a loaded graph on float32 inputs through one
      shared buffer, the outputs where a run_subgraph just placed them; from then
      on such a run is the raw verb RAW_RUN over the local carrier's Unix socket
      (core/microkernel/direct.py): the binding id (RUN_REQUEST) in, a status
      (RUN_REPLY) out - RUN_OK (the outputs are in place), RUN_UNKNOWN (no such
      binding, or its graph or buffer is gone: bind again), RUN_FAILED (send it as
      run_subgraph to learn why: TensorFlow failed, or outputs of other shapes).
      At most MAX_BINDINGS are kept, the oldest go first.

Error kinds: "framework_missing" (TensorFlow cannot be imported in the worker),
"freeze" (TensorFlow could not load or freeze the model: its message), "graph"
(TensorFlow cannot import the graph or find a tensor: its message), "refused"
(the graph would run an op outside the allow-list, a recursive function...), "run"
(TensorFlow failed while running it: its message), "unknown_subgraph", "request"
(arguments that break this contract).
"""
from __future__ import annotations

import os
import re
import struct

import numpy as np

from core.microkernel import ProtocolError, RemoteError

WORKER_MODULE = "fallback_workers.tf_worker"
TF_PYTHON_ENV = "MO_CORE_TF_PYTHON"
TIMEOUT_ENV = "MO_CORE_TF_TIMEOUT"
WORKER_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}

FREEZE = "freeze"
INFER_SUBGRAPH = "infer_subgraph"
LOAD_SUBGRAPH = "load_subgraph"
RUN_SUBGRAPH = "run_subgraph"
VERBS = (FREEZE, INFER_SUBGRAPH, LOAD_SUBGRAPH, RUN_SUBGRAPH)

FRAMEWORK_MISSING = "framework_missing"
FREEZE_FAILED = "freeze"
GRAPH = "graph"
RUN = "run"
UNKNOWN_SUBGRAPH = "unknown_subgraph"
REFUSED = "refused"
SHM = "shm"
UNSHARED = "unshared_buffer"
REQUEST = "request"
INSTALL_HINT = ("install it into that interpreter (pip install tensorflow-cpu==2.21.0) or point {} at a python "
                "that has it".format(TF_PYTHON_ENV))
MAX_NAMES = 4096
MAX_PATH = 4096
MAX_SUBGRAPHS = 64
MAX_BINDINGS = 256
BIND_RUN = "bind_run"
RAW_RUN = 1  # the raw verbs' tags
RAW_SHARE = 2
SHARE_REQUEST = struct.Struct("<Q")  # buffer size; the name follows
RUN_REQUEST = struct.Struct("<Q")  # binding id
RUN_REPLY = struct.Struct("<I")  # status
RUN_OK, RUN_UNKNOWN, RUN_FAILED = range(3)
MAX_GRAPH_BYTES = 1 << 30          # the protocol's message limit bounds it too
MAX_SHARED_BYTES = 1 << 31         # a shared buffer (run_subgraph with shm); larger tensors go as frames
MAX_MAPPED_BYTES = 1 << 31         # the worker keeps at most this much of its parent's buffers mapped
DEFAULT_VALUE_ELEMENTS = 1 << 16
_TENSOR_RE = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*(:\d+)?$")
_ID_RE = re.compile(r"^[0-9a-f]{16,128}$")


def worker_python() -> str:
    """The interpreter the worker runs with (MO_CORE_TF_PYTHON, else this one)."""
    import sys
    return os.environ.get(TF_PYTHON_ENV) or sys.executable


def _path(args: dict, key: str, required: bool = False) -> str | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_PATH or "\0" in value:
        raise RemoteError(REQUEST, f"'{key}' must be a file path")
    return value


def _name(args: dict, key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_PATH or "\0" in value:
        raise RemoteError(REQUEST, f"'{key}' must be a name")
    return value


def _names(args: dict, key: str, pattern=None) -> list[str] | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_NAMES or not all(isinstance(v, str) and v for v in value):
        raise RemoteError(REQUEST, f"'{key}' must be a list of names")
    if pattern is not None:
        bad = [v for v in value if not pattern.match(v)]
        if bad:
            raise RemoteError(REQUEST, f"'{key}': {bad[0][:200]!r} is not a TensorFlow node or tensor name")
    return value


def _int(args: dict, key: str, default: int, lo: int, hi: int) -> int:
    value = args.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise RemoteError(REQUEST, f"'{key}' must be an integer in [{lo}, {hi}]")
    return value


def tensor_name(name: str) -> str:
    """'node' -> 'node:0' (TensorFlow's name of a node's first output)."""
    return name if ":" in name else name + ":0"


# --------------------------------------------------------------------------- freeze
def freeze_request(*, output_path: str, saved_model_dir=None, saved_model_tags=None, saved_model_signature=None,
                   meta_graph=None, input_model=None, input_model_is_text=False, checkpoint=None, outputs=None) -> dict:
    return {"saved_model_dir": saved_model_dir, "saved_model_tags": saved_model_tags,
            "saved_model_signature": saved_model_signature, "meta_graph": meta_graph,
            "input_model": input_model, "input_model_is_text": bool(input_model_is_text),
            "checkpoint": checkpoint, "outputs": outputs, "output_path": output_path}


def parse_freeze(args: dict) -> dict:
    """The worker's side: validated arguments (RemoteError "request" otherwise)."""
    out = {"saved_model_dir": _path(args, "saved_model_dir"), "meta_graph": _path(args, "meta_graph"),
           "input_model": _path(args, "input_model"), "checkpoint": _path(args, "checkpoint"),
           "output_path": _path(args, "output_path", required=True),
           "saved_model_tags": _names(args, "saved_model_tags"), "outputs": _names(args, "outputs"),
           "saved_model_signature": _name(args, "saved_model_signature"),
           "input_model_is_text": bool(args.get("input_model_is_text"))}
    sources = [k for k in ("saved_model_dir", "meta_graph", "input_model") if out[k]]
    if len(sources) != 1:
        raise RemoteError(REQUEST, "give exactly one of saved_model_dir, meta_graph, input_model")
    if out["input_model"] and not out["checkpoint"]:
        raise RemoteError(REQUEST, "a GraphDef with variables needs its checkpoint")
    if not os.path.isdir(os.path.dirname(out["output_path"]) or "."):
        raise RemoteError(REQUEST, "the directory of 'output_path' does not exist")
    return out


def freeze_sandbox(request: dict):
    """The worker's view for a freeze request (core/microkernel/sandbox.py): the model's
    files read-only - the SavedModel directory, the meta graph or GraphDef, the
    checkpoint's own files (<prefix>.index, <prefix>.data-*, and the directory's
    `checkpoint` index) - and the directory of output_path writable. Nothing else of
    the host: a restore op reads only the checkpoint the user named."""
    import glob
    from core.microkernel.sandbox import Sandbox
    read = [request.get(k) for k in ("saved_model_dir", "meta_graph", "input_model") if request.get(k)]
    meta = request.get("meta_graph")
    checkpoint = request.get("checkpoint") or (meta[:-len(".meta")] if meta and meta.endswith(".meta") else None)
    if checkpoint:
        read += [p for p in glob.glob(glob.escape(checkpoint) + "*") if os.path.isfile(p)]
        read.append(os.path.join(os.path.dirname(checkpoint), "checkpoint"))
    return Sandbox(read_only=tuple(os.path.abspath(p) for p in read),
                   writable=(os.path.dirname(os.path.abspath(request["output_path"])),))


def check_freeze_result(result: dict) -> dict:
    """The client's side: the reply holds what the contract says (ProtocolError otherwise)."""
    if not isinstance(result, dict) or not isinstance(result.get("bytes"), int):
        raise ProtocolError("the TensorFlow worker's freeze reply must say how many bytes it wrote")
    for key in ("inputs", "outputs"):
        if not isinstance(result.get(key), list) or not all(isinstance(v, str) for v in result[key]):
            raise ProtocolError(f"the TensorFlow worker's freeze reply must list the {key} as names")
    return result


def subgraph_id(graph_bytes: bytes, inputs: list[str], outputs: list[str]) -> str:
    import hashlib
    digest = hashlib.sha256(graph_bytes)
    digest.update("\0".join(["in"] + inputs + ["out"] + outputs).encode())
    return digest.hexdigest()


def check_allowed(graph_def, roots, what: str, allowed=None, functions=()) -> None:
    """RemoteError "refused" when running `roots` of graph_def (all of it: None), or the
    library `functions`, would execute an op outside the allow-list (tf_ops.py)."""
    from core.services import tf_ops
    found = tf_ops.refused(graph_def, roots, allowed or tf_ops.ALLOWED_OPS, functions=functions)
    if found:
        raise RemoteError(REFUSED, "{} would run operations mo-core never runs (only pure computations are "
                                   "allowed): {}".format(what, tf_ops.describe(found)))


# --------------------------------------------------------------------------- graphs
def graph_frame(graph_bytes: bytes) -> np.ndarray:
    return np.frombuffer(graph_bytes, dtype=np.uint8)


def _graph_bytes(arrays: list) -> bytes:
    if not arrays or arrays[0].dtype != np.uint8 or arrays[0].ndim != 1:
        raise RemoteError(REQUEST, "the first array must be the GraphDef's bytes (uint8, 1-D)")
    if arrays[0].size > MAX_GRAPH_BYTES:
        raise RemoteError(REQUEST, f"the GraphDef is larger than {MAX_GRAPH_BYTES} bytes")
    return arrays[0].tobytes()


# --------------------------------------------------------------------------- infer_subgraph
def infer_subgraph_request(graph_bytes: bytes, outputs: list[str], given: dict | None = None, seed: int = 0,
                           max_value_elements: int = DEFAULT_VALUE_ELEMENTS) -> tuple[dict, list]:
    given = given or {}
    args = {"outputs": [tensor_name(o) for o in outputs], "given": list(given), "seed": seed,
            "max_value_elements": max_value_elements}
    return args, [graph_frame(graph_bytes)] + [np.require(v, requirements="C") for v in given.values()]


def parse_infer_subgraph(args: dict, arrays: list) -> dict:
    outputs = _names(args, "outputs", _TENSOR_RE)
    if not outputs:
        raise RemoteError(REQUEST, "'outputs' must name at least one tensor")
    given = _names(args, "given", _TENSOR_RE) or []
    if len(arrays) != 1 + len(given):
        raise RemoteError(REQUEST, f"infer_subgraph takes the graph and one array per given placeholder "
                                   f"({1 + len(given)} arrays), got {len(arrays)}")
    return {"graph": _graph_bytes(arrays), "outputs": outputs, "given": dict(zip(given, arrays[1:])),
            "seed": _int(args, "seed", 0, 0, 2**32 - 1),
            "max_value_elements": _int(args, "max_value_elements", DEFAULT_VALUE_ELEMENTS, 0, 1 << 28)}


def infer_subgraph_result(outputs: list[dict], ran: bool, fed: dict) -> dict:
    return {"outputs": outputs, "ran": ran, "fed": fed}


def check_infer_subgraph_result(result: dict, arrays: list, outputs: list[str]) -> list[dict]:
    """The client's side: one entry per requested output ({shape, dtype, constant, value: array|None})."""
    items = result.get("outputs") if isinstance(result, dict) else None
    if not isinstance(items, list) or len(items) != len(outputs):
        raise ProtocolError("the TensorFlow worker's infer_subgraph reply must describe each requested output")
    values = list(arrays)
    checked = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("shape"), list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in item["shape"]):
            raise ProtocolError("the TensorFlow worker's infer_subgraph reply has an output without a shape")
        value = None
        if item.get("value"):
            if not values:
                raise ProtocolError("the TensorFlow worker's infer_subgraph reply lacks a value array")
            value = values.pop(0)
            if list(value.shape) != item["shape"]:
                raise ProtocolError("the TensorFlow worker's infer_subgraph reply has a value of another shape")
        checked.append({"shape": item["shape"], "dtype": str(item.get("dtype")), "constant": bool(item.get(
            "constant")), "value": value})
    if values or not isinstance(result.get("fed"), dict):
        raise ProtocolError("the TensorFlow worker's infer_subgraph reply is malformed")
    return checked


# --------------------------------------------------------------------------- load / run
def load_subgraph_request(graph_id: str, graph_bytes: bytes, inputs: list[str], outputs: list[str]) -> tuple:
    return ({"id": graph_id, "inputs": [tensor_name(i) for i in inputs], "outputs": [tensor_name(o) for o in outputs]},
            [graph_frame(graph_bytes)])


def _id(args: dict) -> str:
    value = args.get("id")
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise RemoteError(REQUEST, "'id' must be a hex digest of the graph")
    return value


def parse_load_subgraph(args: dict, arrays: list) -> dict:
    if len(arrays) != 1:
        raise RemoteError(REQUEST, "load_subgraph takes one array: the GraphDef's bytes")
    return {"id": _id(args), "graph": _graph_bytes(arrays), "inputs": _names(args, "inputs", _TENSOR_RE) or [],
            "outputs": _names(args, "outputs", _TENSOR_RE) or []}


def check_load_subgraph_result(result: dict, inputs: list[str], outputs: list[str]) -> dict:
    for key, names in (("inputs", inputs), ("outputs", outputs)):
        items = result.get(key) if isinstance(result, dict) else None
        if not isinstance(items, list) or len(items) != len(names) or not all(
                isinstance(i, dict) and (i.get("shape") is None or isinstance(i.get("shape"), list)) for i in items):
            raise ProtocolError(f"the TensorFlow worker's load_subgraph reply must describe each of the {key}")
    return result


def run_subgraph_request(graph_id: str, inputs: list[np.ndarray]) -> tuple[dict, list]:
    return {"id": graph_id}, list(inputs)


def run_subgraph_shm_request(graph_id: str, buffer_spec: dict, inputs: list, out: int) -> tuple[dict, list]:
    """inputs: [(offset, shape)] of the float32 inputs already in the buffer."""
    return {"id": graph_id, "shm": {"buffer": buffer_spec, "inputs": [[int(o), [int(d) for d in s]]
                                                                     for o, s in inputs], "out": int(out)}}, []


def _span(item, size: int, what: str) -> tuple[int, tuple]:
    if not isinstance(item, list) or len(item) != 2:
        raise RemoteError(REQUEST, f"{what} must be [offset, shape]")
    offset, shape = item
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 or offset % 4 or \
            not isinstance(shape, list) or len(shape) > 8 or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise RemoteError(REQUEST, f"{what} has a bad offset or shape")
    if offset + 4 * int(np.prod(shape, dtype=np.int64)) > size:
        raise RemoteError(SHM, f"{what} ends past the shared buffer ({size} bytes)")
    return offset, tuple(shape)


def parse_run_subgraph(args: dict, arrays: list) -> tuple[str, list, dict | None]:
    """(id, input arrays, shm spec or None: {buffer, inputs: [(offset, shape)], out})."""
    shm = args.get("shm")
    if shm is None:
        return _id(args), list(arrays), None
    if not isinstance(shm, dict) or arrays or not isinstance(shm.get("buffer"), dict) or \
            not isinstance(shm.get("inputs"), list) or len(shm["inputs"]) > MAX_NAMES:
        raise RemoteError(REQUEST, "'shm' must be {buffer, inputs, out}, with no arrays sent")
    size = shm["buffer"].get("size")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_SHARED_BYTES:
        raise RemoteError(REQUEST, f"'shm' buffer size must be 1..{MAX_SHARED_BYTES} bytes")
    out = shm.get("out")
    if isinstance(out, bool) or not isinstance(out, int) or not 0 <= out <= size:
        raise RemoteError(REQUEST, "'shm' out must be an offset in the buffer")
    spans = [_span(item, size, f"shm input {i}") for i, item in enumerate(shm["inputs"])]
    return _id(args), [], {"buffer": shm["buffer"], "inputs": spans, "out": out}


def check_run_subgraph_result(arrays: list, n_outputs: int) -> list:
    if len(arrays) != n_outputs:
        raise ProtocolError(f"the TensorFlow worker's run_subgraph reply has {len(arrays)} arrays for "
                            f"{n_outputs} outputs")
    return list(arrays)


def check_placed(result: dict, n_outputs: int, size: int) -> list[tuple[int, tuple]]:
    """[(offset, shape)] of the outputs a run_subgraph with `shm` placed in the buffer."""
    placed = result.get("placed") if isinstance(result, dict) else None
    if not isinstance(placed, list) or len(placed) != n_outputs:
        raise ProtocolError("the TensorFlow worker's run_subgraph reply does not place every output")
    try:
        return [_span(item, size, f"placed output {i}") for i, item in enumerate(placed)]
    except RemoteError as exc:
        raise ProtocolError(exc.message) from None


def bind_run_request(graph_id: str, buffer_spec: dict, inputs: list, placed: list) -> dict:
    """inputs and placed: [(offset, shape)] of the inputs and outputs in the buffer."""
    args, _ = run_subgraph_shm_request(graph_id, buffer_spec, inputs, min((o for o, _ in placed), default=0))
    args["placed"] = [[int(o), [int(d) for d in s]] for o, s in placed]
    return args


def parse_bind_run(args: dict) -> tuple[str, dict, list]:
    """(id, shm spec as parse_run_subgraph's, [(offset, shape)] of the outputs)."""
    graph_id, _, shm = parse_run_subgraph(args, [])
    if shm is None:
        raise RemoteError(REQUEST, "bind_run needs 'shm': the shared buffer its runs go through")
    placed = args.get("placed")
    if not isinstance(placed, list) or not placed or len(placed) > MAX_NAMES:
        raise RemoteError(REQUEST, "'placed' must be [[offset, shape]], one per output")
    size = shm["buffer"]["size"]
    return graph_id, shm, [_span(item, size, f"placed output {i}") for i, item in enumerate(placed)]


def share_request(spec: dict) -> bytes:
    return SHARE_REQUEST.pack(spec["size"]) + spec["name"].encode("ascii")


def parse_share(payload, fds: list) -> tuple[str, int]:
    """(name, size) of a RAW_SHARE request carrying one descriptor (ValueError otherwise)."""
    if len(fds) != 1:
        raise ValueError("a share request carries exactly one descriptor, got {}".format(len(fds)))
    payload = bytes(payload)
    if not SHARE_REQUEST.size < len(payload) <= SHARE_REQUEST.size + 64:
        raise ValueError("a malformed share request")
    (size,) = SHARE_REQUEST.unpack_from(payload)
    if not 0 < size <= MAX_SHARED_BYTES:
        raise ValueError("a shared buffer of {} bytes (1 to {})".format(size, MAX_SHARED_BYTES))
    return payload[SHARE_REQUEST.size:].decode("ascii", "replace"), size


def check_bind_run_result(result: dict) -> int:
    binding = result.get("binding") if isinstance(result, dict) else None
    if isinstance(binding, bool) or not isinstance(binding, int) or not 0 < binding < 1 << 64:
        raise ProtocolError(f"the TensorFlow worker's bind_run reply has no binding id ({binding!r:.40})")
    return binding
