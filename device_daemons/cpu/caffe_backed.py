"""Caffe-backed layers: run IR layers that only Caffe knows through the Caffe worker.

A legacy IR (CustomLayersMapping.xml + --use-caffe-fallback) keeps layers in
their Caffe type. With the daemon's Caffe fallback on, each such layer (a type
with no built-in or custom kernel) becomes a kernel that sends its inputs and
the IR's blobs to a Caffe worker process, which runs exactly that layer (a net of
Input layers + the layer's own prototxt definition) and sends the outputs back.
The layer's definition comes from the prototxt named in the IR's meta data
(`input_proto`, written by `mo-core convert`). The daemon itself never imports
caffe. Cost: one round trip through ZeroMQ per layer per inference, plus
Caffe's own forward (see the issue note for the measured figures).
"""
from __future__ import annotations

import hashlib
import os
import threading

import numpy as np

from ir import IRError, Network

WORKER_MODULE = "fallback_workers.caffe_worker"


class CaffeWorkerPool:
    """One Caffe worker per daemon, started on first use, restarted on a crash."""

    def __init__(self, timeout: float = 120.0):
        self.timeout = timeout
        self._worker = None
        self._lock = threading.Lock()

    def call(self, op, args, arrays):
        from core.microkernel import WorkerProcess
        with self._lock:  # Caffe nets are not thread-safe: one request at a time
            if self._worker is None:
                self._worker = WorkerProcess(WORKER_MODULE, name="caffe", startup_timeout=120,
                                             request_timeout=self.timeout, restart_budget=3,
                                             env=dict(os.environ, GLOG_minloglevel="2"))
            return self._worker.call(op, args, arrays, timeout=self.timeout)

    def stop(self):
        with self._lock:
            if self._worker is not None:
                self._worker.stop()
                self._worker = None


def _caffe_layers(network: Network) -> dict:
    """{layer name: LayerParameter} from the prototxt the IR was converted from."""
    from core.front.caffe.builder import layer_type
    from core.front.caffe.loader import load_prototxt
    path = network.meta.get("input_proto")
    if not path:
        raise IRError("The IR has no meta data naming its Caffe prototxt (input_proto): it was not converted by "
                      "mo-core from Caffe, so its Caffe-only layers cannot run through the Caffe fallback.")
    net = load_prototxt(path)
    layers = list(net.layer) if net.layer else list(net.layers)
    return {layer.name: (layer, layer_type(layer)) for layer in layers}


def _single_layer_prototxt(pb, input_shapes, v1: bool) -> str:
    from google.protobuf import text_format
    copy = type(pb)()
    copy.CopyFrom(pb)
    del copy.blobs[:]
    lines = ['name: "caffe_backed"']
    for bottom, shape in zip(pb.bottom, input_shapes):
        lines.append('input: "{}"'.format(bottom))
        lines.append("input_shape {{ {} }}".format(" ".join("dim: {}".format(int(d)) for d in shape)))
    lines.append("{} {{\n{}}}".format("layers" if v1 else "layer", text_format.MessageToString(copy, indent=2)))
    return "\n".join(lines) + "\n"


def caffe_backed_kernels(network: Network, pool: CaffeWorkerPool, known_types) -> dict[str, type]:
    """Kernel classes for the layer types of `network` that have no kernel."""
    missing = sorted({layer.type for layer in network.layers if layer.type not in known_types
                      and layer.type != "Input"})
    if not missing:
        return {}
    definitions = _caffe_layers(network)
    search = [os.path.dirname(p) for p in (network.meta.get("input_proto"), network.meta.get("input_model")) if p]

    class CaffeBackedKernel:
        type = missing
        output_is_view = False

        def __init__(self, layer):
            if layer.name not in definitions:
                raise IRError("Layer '{}' ({}) is not in the prototxt {} the IR names; cannot run it through "
                              "Caffe.".format(layer.name, layer.type, network.meta.get("input_proto")))
            self.layer = layer
            self.pb, caffe_type = definitions[layer.name]
            self.v1 = not isinstance(self.pb.type, str)
            self.blobs = [np.ascontiguousarray(b, dtype=np.float32) for b in layer.blobs.values()]
            self.ir_in = [tuple(p.dims) for p in layer.inputs]
            self.ir_out = [tuple(p.dims) for p in layer.outputs]
            self._texts = {}

        def _text(self, shapes):
            key = tuple(tuple(s) for s in shapes)
            if key not in self._texts:
                text = _single_layer_prototxt(self.pb, shapes, self.v1)
                self._texts[key] = (text, hashlib.sha1(text.encode()).hexdigest())
            return self._texts[key]

        def getMemoryShapes(self, input_shapes):  # noqa: N802 (OpenCV's name)
            shapes = [tuple(s) for s in input_shapes]
            if shapes == self.ir_in:
                return list(self.ir_out)
            zeros = [np.zeros(s, dtype=np.float32) for s in shapes]
            return [tuple(o.shape) for o in self.forward(zeros)]

        def forward(self, inputs):
            text, key = self._text([x.shape for x in inputs])
            args = {"prototxt": text, "key": key, "layer": self.layer.name, "n_inputs": len(inputs),
                    "python_path": search}
            from core.microkernel import MicrokernelError
            try:
                _, outputs = pool.call("forward_layer", args,
                                       [np.ascontiguousarray(x, np.float32) for x in inputs] + self.blobs)
            except MicrokernelError as exc:
                raise IRError("Caffe-backed layer '{}' ({}) failed in the Caffe worker: {}".format(
                    self.layer.name, self.layer.type, exc)) from None
            return [np.array(o) for o in outputs]

    return {t: CaffeBackedKernel for t in missing}
