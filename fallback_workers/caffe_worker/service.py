"""The Caffe worker's request handlers (imported only inside the worker process)."""
from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

from core.microkernel import RemoteError

os.environ.setdefault("GLOG_minloglevel", "2")
try:
    import caffe
except ImportError as exc:  # reported by the supervisor from this process's stderr
    print("[ ERROR ] pycaffe is not importable in the Caffe worker ({}). Build pycaffe (the README's set-up "
          "does it) or put it on PYTHONPATH.".format(exc), file=sys.stderr, flush=True)
    raise SystemExit(3)

caffe.set_mode_cpu()
MAX_NETS = 32


def _add_paths(paths):
    for p in paths or []:
        if p and p not in sys.path:
            sys.path.insert(0, p)


def _net_from_text(text: str, weights: str | None):
    with tempfile.NamedTemporaryFile("w", suffix=".prototxt", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        if weights:
            return caffe.Net(path, weights, caffe.TEST)
        return caffe.Net(path, caffe.TEST)
    finally:
        os.unlink(path)


def infer_shapes(args, arrays):
    _add_paths(args.get("python_path"))
    layers = list(args.get("layers") or [])
    try:
        net = _net_from_text(args["prototxt"], args.get("weights"))
    except Exception as exc:  # a Python-side failure; C++ CHECKs abort the process instead
        raise RemoteError("caffe_net", "Error happened while constructing caffe.Net in the Caffe fallback "
                          "function: {}: {}".format(type(exc).__name__, exc), 12)
    rng = np.random.default_rng(int(args.get("seed", 0)))
    for name in net.inputs:
        blob = net.blobs[name]
        blob.data[...] = rng.standard_normal(blob.data.shape).astype(np.float32)
    try:
        net.forward()
    except Exception as exc:
        raise RemoteError("caffe_forward", "Cannot infer shapes due to exception in Caffe: {}: {}".format(
            type(exc).__name__, exc), 13)
    names = list(net._layer_names)
    shapes = {}
    for layer in layers:
        if layer not in names:
            raise RemoteError("caffe_net", "Layer '{}' is not in the net Caffe built.".format(layer))
        shapes[layer] = [list(net.blobs[top].data.shape) for top in net.top_names[layer]]
    return {"shapes": shapes}


_nets: dict = {}


def forward_layer(args, arrays):
    _add_paths(args.get("python_path"))
    n_inputs = int(args["n_inputs"])
    inputs, blobs = arrays[:n_inputs], arrays[n_inputs:]
    key = (args["key"], tuple(tuple(a.shape) for a in inputs))
    net = _nets.get(key)
    if net is None:
        if len(_nets) >= MAX_NETS:
            _nets.pop(next(iter(_nets)))
        try:
            net = _net_from_text(args["prototxt"], None)
        except Exception as exc:
            raise RemoteError("caffe_net", "Cannot build the Caffe net for layer '{}': {}: {}".format(
                args.get("layer"), type(exc).__name__, exc), 12)
        _nets[key] = net
    layer = args["layer"]
    params = net.params[layer] if layer in net.params else []
    if len(params) != len(blobs):
        raise RemoteError("caffe_blobs", "Layer '{}' has {} blobs in Caffe but {} were sent.".format(
            layer, len(params), len(blobs)))
    for param, blob in zip(params, blobs):
        param.data[...] = blob.reshape(param.data.shape)
    for name, value in zip(net.inputs, inputs):
        net.blobs[name].reshape(*value.shape)
        net.blobs[name].data[...] = value
    net.reshape()
    out = net.forward()
    tops = list(net.top_names[layer])
    return {"outputs": tops}, [np.ascontiguousarray(out[t], dtype=np.float32) for t in tops]


def register(server):
    server.handle("infer_shapes", infer_shapes)
    server.handle("forward_layer", forward_layer)
