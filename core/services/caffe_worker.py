"""The contract of the Caffe worker: how it is launched, its verbs, what their
arguments must be and what their results hold, written once and used by the
worker (fallback_workers/caffe_worker/service.py) and by its two clients: the
converter's Caffe fallback (core/front/caffe/fallback.py) and the CPU daemon's
Caffe-backed layers (device_daemons/cpu/caffe_backed.py). Pure Python: importing
it loads no Caffe.

Launch (launcher / WorkerProcess):
    python -m fallback_workers.caffe_worker --endpoint EP [--python-path DIR ...]
                                            [--python-layers any|configured]
  --python-path   directories `Python` layers are imported from, put first on
                  sys.path when the worker starts; no request can add one
  --python-layers configured: a `Python` layer's module must be found in those
                  directories (the daemon: IR contents never choose code to
                  import); any: also elsewhere on sys.path (the converter: the
                  user's own model, as pycaffe itself would)

hello: the microkernel's, plus {"framework": {"name": "caffe", "available": bool,
"version": str|None, "error": str|None}}: a worker without pycaffe still starts
and says so, and every verb then fails with kind "framework_missing".

Verbs:
  infer_shapes {prototxt: str, weights: str|None, layers: [str], seed: int,
                given: [input blob]} + arrays [one per given input]
      -> {shapes: {layer: [[dims], ...]}, fed: {input blob: "given"|"noise"}}
      builds one caffe.Net from the prototxt text (the sub-net the converter cut
      out, Input layers at the shapes it inferred), forwards once on the given
      arrays (the user's --fallback_input) and seeded noise for the other inputs,
      and returns the top shapes of every requested layer
  forward_net {prototxt: str, weights: str|None, given: [input blob],
               outputs: [[layer, top index]]} + arrays [one per given input]
      -> {outputs: [[layer, top index]]} + arrays (one per output)
      builds the net (inputs reshaped to the arrays' shapes), forwards it once,
      layer by layer, on the given arrays (seeded noise for other inputs) and
      returns each requested top as the layer left it - before a later in-place
      layer overwrites its blob (`convert --validate`)
  forward_layer {definition: str, n_inputs: int} + arrays [inputs..., blobs...]
      -> {outputs: [top names]} + arrays (one per top)
      runs one layer (Input layers at the inputs' shapes + the layer's own
      prototxt `definition`) on the given inputs and blobs

Error kinds: "framework_missing" (pycaffe cannot be imported in the worker),
"caffe_net" (Caffe could not build the net), "caffe_forward", "caffe_blobs"
(blob count), "python_layer_refused" (a Python layer outside --python-path),
"request" (arguments that break this contract). A Caffe CHECK failure aborts the
worker: the supervisor reports glog's message from its log.
"""
from __future__ import annotations

import numpy as np

from core.microkernel import ProtocolError, RemoteError
from ir.model import CAFFE_DEFINITION_ATTR

WORKER_MODULE = "fallback_workers.caffe_worker"

INFER_SHAPES = "infer_shapes"
FORWARD_LAYER = "forward_layer"
FORWARD_NET = "forward_net"

FRAMEWORK_MISSING = "framework_missing"
CAFFE_NET = "caffe_net"
CAFFE_FORWARD = "caffe_forward"
CAFFE_BLOBS = "caffe_blobs"
PYTHON_LAYER_REFUSED = "python_layer_refused"
REQUEST = "request"

PYTHON_LAYERS = ("any", "configured")
# The IR data attribute that carries a Caffe-backed layer's own definition (its
# prototxt text without blobs, one line: `layer { ... }`, or `layers { ... }` for
# the V1 format); declared in ir/ so that every IR emitter knows it.
DEFINITION_ATTR = CAFFE_DEFINITION_ATTR
MAX_TEXT = 64 << 20  # a prototxt the converter sends (a whole sub-net)
MAX_DEFINITION = 1 << 20  # one layer's definition


def worker_args(python_path=(), python_layers: str = "any") -> list[str]:
    """The worker's launch options (after --endpoint / --parent-pid)."""
    if python_layers not in PYTHON_LAYERS:
        raise ValueError(f"python_layers must be one of {PYTHON_LAYERS}, got {python_layers!r}")
    args = ["--python-layers", python_layers]
    for directory in python_path:
        args += ["--python-path", directory]
    return args


def sandbox(weights: str | None = None, python_path=()):
    """The Caffe worker's view (core/microkernel/sandbox.py): the weights file and the
    Python layers' directories read-only, nothing else of the host."""
    import os
    from core.microkernel.sandbox import Sandbox
    return Sandbox(read_only=tuple(os.path.abspath(p) for p in [weights, *python_path] if p))


def _text(value, what: str, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise RemoteError(REQUEST, f"'{what}' must be a text of at most {limit} characters")
    return value


# --------------------------------------------------------------------------- infer_shapes

def infer_shapes_request(prototxt: str, weights: str | None, layers: list[str], seed: int = 0,
                         given: list[str] = ()) -> dict:
    """(The arrays of `given`, in order, go with the request.)"""
    return {"prototxt": prototxt, "weights": weights, "layers": list(layers), "seed": seed, "given": list(given)}


def parse_given(args: dict, arrays: list) -> dict:
    """{input blob: array} of a request's `given` inputs."""
    given = args.get("given") or []
    if not isinstance(given, list) or not all(isinstance(n, str) and n for n in given) or len(given) != len(arrays):
        raise RemoteError(REQUEST, "'given' must name one input blob per array sent")
    if not all(a.dtype.kind in "biuf" for a in arrays):
        raise RemoteError(REQUEST, "given inputs must be arrays of numbers")
    return dict(zip(given, arrays))


def parse_infer_shapes(args: dict) -> tuple[str, str | None, list[str], int]:
    prototxt = _text(args.get("prototxt"), "prototxt", MAX_TEXT)
    weights = args.get("weights")
    if weights is not None and not isinstance(weights, str):
        raise RemoteError(REQUEST, "'weights' must be a .caffemodel path or nil")
    layers = args.get("layers")
    if not isinstance(layers, list) or not all(isinstance(n, str) for n in layers):
        raise RemoteError(REQUEST, "'layers' must be a list of layer names")
    seed = args.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise RemoteError(REQUEST, "'seed' must be an integer in [0, 2^32)")
    return prototxt, weights, layers, seed


def check_infer_shapes_result(result: dict, layers: list[str]) -> dict[str, list[list[int]]]:
    shapes = result.get("shapes")
    if not isinstance(shapes, dict) or set(shapes) != set(layers) or not all(
            isinstance(tops, list) and all(isinstance(s, list) and all(isinstance(d, int) for d in s) for s in tops)
            for tops in shapes.values()):
        raise ProtocolError("the Caffe worker's infer_shapes reply must map each requested layer to a list "
                            "of shapes")
    return shapes


# --------------------------------------------------------------------------- forward_net

def forward_net_request(prototxt: str, weights: str | None, given: list[str], outputs: list) -> dict:
    """outputs: [(layer, top index)]. (The arrays of `given`, in order, go with the request.)"""
    return {"prototxt": prototxt, "weights": weights, "given": list(given),
            "outputs": [[layer, int(top)] for layer, top in outputs]}


def parse_forward_net(args: dict, arrays: list) -> tuple[str, str | None, dict, list[tuple[str, int]]]:
    prototxt = _text(args.get("prototxt"), "prototxt", MAX_TEXT)
    weights = args.get("weights")
    if weights is not None and not isinstance(weights, str):
        raise RemoteError(REQUEST, "'weights' must be a .caffemodel path or nil")
    outputs = args.get("outputs")
    if not isinstance(outputs, list) or not all(
            isinstance(o, list) and len(o) == 2 and isinstance(o[0], str) and isinstance(o[1], int)
            and not isinstance(o[1], bool) and o[1] >= 0 for o in outputs):
        raise RemoteError(REQUEST, "'outputs' must be a list of [layer name, top index]")
    return prototxt, weights, parse_given(args, arrays), [(layer, top) for layer, top in outputs]


def check_forward_net_result(result: dict, arrays: list, outputs: list) -> list:
    if not isinstance(result, dict) or len(result.get("outputs") or []) != len(outputs) or \
            len(arrays) != len(outputs):
        raise ProtocolError("the Caffe worker's forward_net reply must hold one array per requested output")
    return list(arrays)


# --------------------------------------------------------------------------- forward_layer

def forward_layer_request(definition: str, inputs: list[np.ndarray], blobs: list[np.ndarray]) -> tuple[dict, list]:
    arrays = [np.ascontiguousarray(x, np.float32) for x in inputs] + \
             [np.ascontiguousarray(b, np.float32) for b in blobs]
    return {"definition": definition, "n_inputs": len(inputs)}, arrays


def parse_forward_layer(args: dict, arrays: list) -> tuple[str, list, list]:
    """(definition, inputs, blobs) of a forward_layer request."""
    definition = _text(args.get("definition"), "definition", MAX_DEFINITION)
    n = args.get("n_inputs")
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= len(arrays):
        raise RemoteError(REQUEST, f"'n_inputs' must be the number of input arrays (0 to {len(arrays)})")
    if not all(a.dtype == np.float32 for a in arrays):
        raise RemoteError(REQUEST, "forward_layer takes float32 arrays")
    return definition, list(arrays[:n]), list(arrays[n:])


def check_forward_layer_result(result: dict, arrays: list) -> list[np.ndarray]:
    tops = result.get("outputs")
    if not isinstance(tops, list) or len(tops) != len(arrays):
        raise ProtocolError("the Caffe worker's forward_layer reply must hold one array per top")
    return list(arrays)
