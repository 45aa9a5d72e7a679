"""The Caffe worker's request handlers (imported only inside the worker process,
once pycaffe imported: framework.load_caffe). The verbs: core/services/caffe_worker.py."""
from __future__ import annotations

import collections
import hashlib
import importlib.machinery
import os
import sys
import tempfile

import numpy as np
from google.protobuf import text_format

import caffe
from caffe.proto import caffe_pb2
from core.microkernel import RemoteError

from core.services import caffe_worker as contract

MAX_NETS = 32
_V1_PYTHON = 39  # V1LayerParameter.LayerType.PYTHON


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


class PythonLayerPolicy:
    """Where `Python` layers may be imported from (the --python-layers option)."""

    def __init__(self, directories: list[str], mode: str):
        self.directories = [os.path.realpath(d) for d in directories if d]
        self.mode = mode

    def _inside(self, path: str | None) -> bool:
        if not path:
            return False
        real = os.path.realpath(path)
        return any(real == d or real.startswith(d + os.sep) for d in self.directories)

    def check(self, layer) -> None:
        """Refuse a Python layer whose module is not found in a configured directory
        (with mode "configured"), before Caffe imports anything."""
        is_python = layer.type == "Python" if isinstance(layer.type, str) else layer.type == _V1_PYTHON
        if self.mode != "configured" or not is_python:
            return
        module = layer.python_param.module
        top = module.split(".")[0]
        loaded = sys.modules.get(top)
        if loaded is not None:
            origin = getattr(loaded, "__file__", None) or next(iter(getattr(loaded, "__path__", [])), None)
        else:
            spec = importlib.machinery.PathFinder.find_spec(top, sys.path)  # finds, imports nothing
            origin = None if spec is None else (spec.origin if spec.has_location else
                                                next(iter(spec.submodule_search_locations or []), None))
        if not self._inside(origin):
            where = ", ".join(self.directories) or "none configured"
            raise RemoteError(contract.PYTHON_LAYER_REFUSED, (
                f"layer '{layer.name}' is a Python layer of module '{module}', which is not in the "
                f"directories this worker may import Python layers from ({where}); an IR never "
                f"chooses code to import: start the daemon with --python-path DIR for the directory "
                f"that holds it"))


def _one_layer(definition: str):
    """The single LayerParameter (or V1LayerParameter) of a definition's text."""
    net = caffe_pb2.NetParameter()
    try:
        text_format.Merge(definition, net)
    except text_format.ParseError as exc:
        raise RemoteError(contract.CAFFE_NET, f"the layer definition is not valid prototxt: {exc}") from None
    layers = list(net.layer) + list(net.layers)
    if len(layers) != 1 or net.input or net.input_shape or net.input_dim:
        raise RemoteError(contract.REQUEST, "a layer definition must hold exactly one layer and nothing else")
    return layers[0]


def _built_net(prototxt, weights):
    try:
        return _net_from_text(prototxt, weights)
    except Exception as exc:  # a Python-side failure; C++ CHECKs abort the process instead
        missing = _unimportable_python_layers(prototxt)
        if missing:  # (Boost.Python then says only "SystemError: ... returned NULL")
            raise RemoteError(contract.CAFFE_NET, "Error happened while constructing caffe.Net in the Caffe fallback "
                              "function: {}; put the module beside the prototxt or on PYTHONPATH".format("; ".join(
                                  "Python layer '{}' names module '{}', which cannot be found".format(name, module)
                                  for name, module in missing)), 12) from None
        raise RemoteError(contract.CAFFE_NET, "Error happened while constructing caffe.Net in the Caffe fallback "
                          "function: {}: {}".format(type(exc).__name__, exc), 12)


def _unimportable_python_layers(prototxt: str) -> list[tuple[str, str]]:
    """(layer, module) of the Python layers whose module's top package is nowhere on sys.path."""
    net = caffe_pb2.NetParameter()
    try:
        text_format.Merge(prototxt, net)
    except text_format.ParseError:
        return []
    missing = []
    for layer in net.layer:
        if layer.type == "Python" and layer.python_param.module:
            top = layer.python_param.module.split(".")[0]
            if top not in sys.modules and importlib.machinery.PathFinder.find_spec(top, sys.path) is None:
                missing.append((layer.name, layer.python_param.module))
    return missing


def _feed(net, given: dict, seed: int, reshape: bool) -> dict:
    """The net's inputs: the given arrays (reshaped to theirs when `reshape`), seeded noise
    for the others; {input: "given"|"noise"}."""
    unknown = sorted(set(given) - set(net.inputs))
    if unknown:
        raise RemoteError(contract.REQUEST, "the net has no input blob {}; its inputs are {}".format(
            ", ".join(unknown), ", ".join(net.inputs)))
    if reshape:
        for name, value in given.items():
            net.blobs[name].reshape(*value.shape)
        net.reshape()
    rng = np.random.default_rng(seed)
    fed = {}
    for name in net.inputs:
        blob = net.blobs[name]
        if name in given:
            if tuple(given[name].shape) != tuple(blob.data.shape):
                raise RemoteError(contract.REQUEST, "the array given for input '{}' has the shape {}, the net's "
                                  "input has {}".format(name, list(given[name].shape), list(blob.data.shape)))
            blob.data[...] = given[name]
            fed[name] = "given"
        else:
            blob.data[...] = rng.standard_normal(blob.data.shape).astype(np.float32)
            fed[name] = "noise"
    return fed


def infer_shapes(args, arrays):
    prototxt, weights, layers, seed = contract.parse_infer_shapes(args)
    given = contract.parse_given(args, arrays)
    net = _built_net(prototxt, weights)
    fed = _feed(net, given, seed, reshape=False)
    try:
        net.forward()
    except Exception as exc:
        raise RemoteError(contract.CAFFE_FORWARD, "Cannot infer shapes due to exception in Caffe: {}: {}".format(
            type(exc).__name__, exc), 13)
    names = list(net._layer_names)
    shapes = {}
    for layer in layers:
        if layer not in names:
            raise RemoteError(contract.CAFFE_NET, "Layer '{}' is not in the net Caffe built.".format(layer))
        shapes[layer] = [list(net.blobs[top].data.shape) for top in net.top_names[layer]]
    return {"shapes": shapes, "fed": fed}


def forward_net(args, arrays):
    prototxt, weights, given, outputs = contract.parse_forward_net(args, arrays)
    net = _built_net(prototxt, weights)
    _feed(net, given, 0, reshape=True)
    names = list(net._layer_names)
    wanted: dict = {}
    for i, (layer, top) in enumerate(outputs):
        if layer not in names or top >= len(net.top_names[layer]):
            raise RemoteError(contract.REQUEST, "the net has no layer '{}' with a top {}".format(layer, top))
        wanted.setdefault(layer, []).append((i, top))
    results = [None] * len(outputs)
    try:
        for layer in names:  # one layer at a time: a top is taken before an in-place layer overwrites it
            net.forward(start=layer, end=layer)
            for i, top in wanted.get(layer, ()):
                results[i] = np.array(net.blobs[net.top_names[layer][top]].data, dtype=np.float32)
    except Exception as exc:
        raise RemoteError(contract.CAFFE_FORWARD, "Caffe failed to run the net: {}: {}".format(
            type(exc).__name__, exc))
    return {"outputs": [[layer, top] for layer, top in outputs]}, results


class LayerRunner:
    """forward_layer: one Caffe net per (definition, input shapes), the most recent
    MAX_NETS kept."""

    def __init__(self, policy: PythonLayerPolicy):
        self.policy = policy
        self.nets: collections.OrderedDict = collections.OrderedDict()

    def _net(self, definition: str, shapes: list[tuple]):
        key = (hashlib.sha256(definition.encode()).hexdigest(), tuple(shapes))
        found = self.nets.get(key)
        if found is not None:
            self.nets.move_to_end(key)
            return found
        layer = _one_layer(definition)
        self.policy.check(layer)
        if len(layer.bottom) != len(shapes):
            raise RemoteError(contract.REQUEST, "layer '{}' has {} bottoms but {} inputs were sent".format(
                layer.name, len(layer.bottom), len(shapes)))
        lines = ['name: "caffe_backed"']
        for bottom, shape in zip(layer.bottom, shapes):
            lines.append('input: "{}"'.format(bottom))
            lines.append("input_shape {{ {} }}".format(" ".join("dim: {}".format(int(d)) for d in shape)))
        lines.append(definition)
        try:
            net = _net_from_text("\n".join(lines) + "\n", None)
        except Exception as exc:
            raise RemoteError(contract.CAFFE_NET, "Cannot build the Caffe net for layer '{}': {}: {}".format(
                layer.name, type(exc).__name__, exc), 12) from None
        if len(self.nets) >= MAX_NETS:
            self.nets.popitem(last=False)
        self.nets[key] = (net, layer.name)
        return net, layer.name

    def forward_layer(self, args, arrays):
        definition, inputs, blobs = contract.parse_forward_layer(args, arrays)
        net, name = self._net(definition, [tuple(a.shape) for a in inputs])
        params = net.params[name] if name in net.params else []
        if len(params) != len(blobs):
            raise RemoteError(contract.CAFFE_BLOBS, "Layer '{}' has {} blobs in Caffe but {} were sent.".format(
                name, len(params), len(blobs)))
        for param, blob in zip(params, blobs):
            if blob.size != param.data.size:
                raise RemoteError(contract.CAFFE_BLOBS, "Layer '{}': a blob of {} values was sent for one of "
                                  "shape {}.".format(name, blob.size, list(param.data.shape)))
            param.data[...] = blob.reshape(param.data.shape)
        for bottom, value in zip(net.inputs, inputs):
            net.blobs[bottom].reshape(*value.shape)
            net.blobs[bottom].data[...] = value
        net.reshape()
        try:
            out = net.forward()
        except Exception as exc:
            raise RemoteError(contract.CAFFE_FORWARD, "Layer '{}' failed in Caffe: {}: {}".format(
                name, type(exc).__name__, exc)) from None
        tops = list(net.top_names[name])
        return {"outputs": tops}, [np.ascontiguousarray(out[t], dtype=np.float32) for t in tops]


def register(server, python_path: list[str], python_layers: str) -> None:
    runner = LayerRunner(PythonLayerPolicy(python_path, python_layers))
    server.handle(contract.INFER_SHAPES, infer_shapes)
    server.handle(contract.FORWARD_NET, forward_net)
    server.handle(contract.FORWARD_LAYER, runner.forward_layer)
