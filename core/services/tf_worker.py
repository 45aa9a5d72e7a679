"""The contract of the TensorFlow worker: how it is launched, its verbs, what their
arguments must be and what their results hold, written once and used by the
worker (fallback_workers/tf_worker/service.py) and by its client, the converter's
TensorFlow front end (core/front/tf/freeze.py). Pure Python: importing it loads
no TensorFlow.

Launch (core/microkernel: WorkerProcess over the launcher):
    <python> -m fallback_workers.tf_worker --endpoint EP --parent-pid PID
  <python> is MO_CORE_TF_PYTHON when set (a venv of its own with TensorFlow:
  it needs numpy, pyzmq and msgpack too), else the core's own interpreter.

hello: the microkernel's, plus {"framework": {"name": "tensorflow", "available":
bool, "version": str|None, "error": str|None}}: a worker without TensorFlow still
starts and says so, and every verb then fails with kind "framework_missing",
whose message says how to install it.

Verbs:
  freeze {saved_model_dir: str|None, saved_model_tags: [str]|None,
          meta_graph: str|None, input_model: str|None, input_model_is_text: bool,
          checkpoint: str|None, outputs: [str]|None, output_path: str}
      -> {inputs: [names], outputs: [names], bytes: int}
      one of: a SavedModel directory (TF2 or TF1; its serving signature, or the
      only one), a TF1 meta graph with its checkpoint (default: the meta graph's
      path without ".meta"), or a GraphDef with variables (input_model) and a
      checkpoint. Variables become constants; the frozen GraphDef is written
      (binary) to output_path, a file in a private directory of the caller;
      `outputs` names the output nodes (else the signature's, or the nodes
      nothing reads).

Error kinds: "framework_missing" (TensorFlow cannot be imported in the worker),
"freeze" (TensorFlow could not load or freeze the model: its message), "request"
(arguments that break this contract).
"""
from __future__ import annotations

import os

from core.microkernel import ProtocolError, RemoteError

WORKER_MODULE = "fallback_workers.tf_worker"
TF_PYTHON_ENV = "MO_CORE_TF_PYTHON"
TIMEOUT_ENV = "MO_CORE_TF_TIMEOUT"

FREEZE = "freeze"

FRAMEWORK_MISSING = "framework_missing"
FREEZE_FAILED = "freeze"
REQUEST = "request"

INSTALL_HINT = ("install it into that interpreter (pip install tensorflow-cpu==2.21.0) or point {} at a python "
                "that has it".format(TF_PYTHON_ENV))
MAX_NAMES = 4096
MAX_PATH = 4096


def _path(args: dict, key: str, required: bool = False) -> str | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_PATH or "\0" in value:
        raise RemoteError(REQUEST, f"'{key}' must be a file path")
    return value


def _names(args: dict, key: str) -> list[str] | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_NAMES or not all(isinstance(v, str) and v for v in value):
        raise RemoteError(REQUEST, f"'{key}' must be a list of names")
    return value


def freeze_request(*, output_path: str, saved_model_dir=None, saved_model_tags=None, meta_graph=None,
                   input_model=None, input_model_is_text=False, checkpoint=None, outputs=None) -> dict:
    return {"saved_model_dir": saved_model_dir, "saved_model_tags": saved_model_tags, "meta_graph": meta_graph,
            "input_model": input_model, "input_model_is_text": bool(input_model_is_text),
            "checkpoint": checkpoint, "outputs": outputs, "output_path": output_path}


def parse_freeze(args: dict) -> dict:
    """The worker's side: validated arguments (RemoteError "request" otherwise)."""
    out = {"saved_model_dir": _path(args, "saved_model_dir"), "meta_graph": _path(args, "meta_graph"),
           "input_model": _path(args, "input_model"), "checkpoint": _path(args, "checkpoint"),
           "output_path": _path(args, "output_path", required=True),
           "saved_model_tags": _names(args, "saved_model_tags"), "outputs": _names(args, "outputs"),
           "input_model_is_text": bool(args.get("input_model_is_text"))}
    sources = [k for k in ("saved_model_dir", "meta_graph", "input_model") if out[k]]
    if len(sources) != 1:
        raise RemoteError(REQUEST, "give exactly one of saved_model_dir, meta_graph, input_model")
    if out["input_model"] and not out["checkpoint"]:
        raise RemoteError(REQUEST, "a GraphDef with variables needs its checkpoint")
    if not os.path.isdir(os.path.dirname(out["output_path"]) or "."):
        raise RemoteError(REQUEST, "the directory of 'output_path' does not exist")
    return out


def check_freeze_result(result: dict) -> dict:
    """The client's side: the reply holds what the contract says (ProtocolError otherwise)."""
    if not isinstance(result, dict) or not isinstance(result.get("bytes"), int):
        raise ProtocolError("the TensorFlow worker's freeze reply must say how many bytes it wrote")
    for key in ("inputs", "outputs"):
        if not isinstance(result.get(key), list) or not all(isinstance(v, str) for v in result[key]):
            raise ProtocolError(f"the TensorFlow worker's freeze reply must list the {key} as names")
    return result
