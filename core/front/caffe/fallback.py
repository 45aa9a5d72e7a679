"""--use-caffe-fallback: real Caffe computes the output shapes of mapped layers.

The core never imports caffe. It cuts out the part of the model that feeds the
mapped layers (their ancestors), writes it back as a prototxt whose inputs have
the shapes the core knows (so --input/--input_shape cutting is respected), and
asks the Caffe worker process to build that one net, forward it once on seeded
noise and return the top shapes of all the mapped layers: one round trip, one net,
one forward, however many custom layers there are.
"""
from __future__ import annotations

import logging
import os
import re

import numpy as np
from google.protobuf import text_format

from core.errors import Error

log = logging.getLogger("mo_core")

# Layers whose output size depends on the data, not only on shapes (reference
# guide, "Constraints of Using the Caffe Fallback").
DATA_DEPENDENT = ("Proposal", "DetectionOutput", "SimplerNMS")
WORKER_MODULE = "fallback_workers.caffe_worker"


class CaffeFallback:
    def __init__(self, enabled: bool, weights: str | None, search_paths=(), timeout: float | None = None):
        self.enabled = enabled
        self.weights = weights
        self.search_paths = [p for p in search_paths if p]
        # MO_CORE_FALLBACK_TIMEOUT (seconds) bounds the one net build + forward
        self.timeout = timeout or float(os.environ.get("MO_CORE_FALLBACK_TIMEOUT", "300"))
        self.shapes: dict | None = None
        self.stats = {"round_trips": 0, "layers": 0}

    def unavailable_reason(self) -> str | None:
        return None if self.enabled else "--use-caffe-fallback is off"

    # used as the `infer` of every mapped layer -----------------------------------
    def infer(self, node):
        if self.shapes is None or node.name not in self.shapes:
            self._run(node.graph)
        shapes = self.shapes[node.name]
        outs = node.out_nodes()
        if len(shapes) != len(outs):
            raise Error("Caffe gives layer '{}' {} outputs but the prototxt names {} tops.", node.name, len(shapes),
                        len(outs))
        for port, out in outs.items():
            out.shape = np.array(shapes[port], dtype=np.int64)

    def _targets(self, graph):
        return [n for n in graph.op_nodes() if n.soft_get("infer") == self.infer]

    def _run(self, graph):
        from core.microkernel import MicrokernelError, RemoteError, WorkerError, WorkerProcess
        targets = self._targets(graph)
        text = subnet_prototxt(graph, targets)
        names = [n.name for n in targets]
        for n in targets:
            kind = n.caffe_type
            if kind in DATA_DEPENDENT or (kind == "Python" and any(
                    w in n.pb.python_param.layer for w in ("Proposal", "Detection", "NMS"))):
                log.warning("The output shape of layer '%s' (%s) computed by the Caffe fallback may depend on the "
                            "input data: Caffe ran it on noise. Check the shape in the IR, or write an extension with "
                            "an infer function for it.", n.name, kind)
        worker = WorkerProcess(WORKER_MODULE, name="caffe", startup_timeout=120, request_timeout=self.timeout,
                               restart_budget=0, env=dict(os.environ, GLOG_minloglevel="2"))
        layer_list = ", ".join(names)
        try:
            result, _ = worker.call("infer_shapes", {"prototxt": text, "weights": self.weights, "layers": names,
                                                     "python_path": self.search_paths, "seed": 0},
                                    timeout=self.timeout)
        except WorkerError as exc:
            tail = caffe_message(exc.stderr_tail)
            if "pycaffe is not importable" in tail:
                raise Error("Cannot infer shape for node(s) {} because there is no Caffe available. {} Please "
                            "register python infer function for op or use Caffe for shape inference.",
                            layer_list, tail, faq=14) from None
            raise Error("Cannot infer shapes due to exception in Caffe for layer(s) {}: the Caffe worker {}.\n"
                        "Caffe said: {}", layer_list, exc.exit_status or "failed", tail or "(nothing)",
                        faq=13) from None
        except RemoteError as exc:
            raise Error("Caffe fallback for layer(s) {}: {}", layer_list, exc.message, faq=exc.faq or 13) from None
        except MicrokernelError as exc:  # timeouts and transport failures
            raise Error("Caffe fallback for layer(s) {} failed: {}. If Caffe is only slow on this net, allow it more "
                        "time with MO_CORE_FALLBACK_TIMEOUT=SECONDS (now {:g}).", layer_list, exc, self.timeout,
                        faq=13) from None
        finally:
            worker.stop()
        self.shapes = result["shapes"]
        self.stats["round_trips"] += 1
        self.stats["layers"] += len(names)


def caffe_message(stderr_tail: str) -> str:
    """The useful lines of a worker's stderr: glog's fatal line (a CHECK), our own
    errors, else the signal a faulthandler dump names and the user frames in it."""
    lines = [line.strip() for line in (stderr_tail or "").splitlines() if line.strip()]
    glog_fatal = re.compile(r"^[FE]\d{4}")  # glog: F20261122 12:00:00.000 ... file.cpp:171] message
    keep = [line for line in lines if glog_fatal.match(line) or "Check failed" in line or line.startswith("[ ERROR ]")]
    if keep:
        return "\n ".join(keep[-4:])
    fatal = [line for line in lines if line.startswith("Fatal Python error")]
    if fatal:
        frames = [line for line in lines if line.startswith("File ") and not any(
            part in line for part in ("core/microkernel", "site-packages/zmq", "<frozen", "caffe_worker", "threading"))]
        return "\n ".join(fatal[:1] + frames[:3])
    return "\n ".join(lines[-6:])


def _input_blob_name(param) -> str:
    """The blob name the readers of an Input node use in the prototxt."""
    data = param.out_node(0)
    for consumer in data.consumers():
        pb = consumer.soft_get("pb")
        if pb is None:
            continue
        for u, attrs in consumer.in_edges_data():
            if u == data.id and "bin" not in attrs and attrs["in"] < len(pb.bottom):
                return pb.bottom[attrs["in"]]
    return data.name


def subnet_prototxt(graph, targets) -> str:
    """A deploy prototxt of the ancestors of `targets`, inputs at the graph's shapes."""
    import networkx as nx
    keep = set()
    for t in targets:
        keep |= nx.ancestors(graph, t.id) | {t.id}
    lines = ["name: \"caffe_fallback\""]
    layers = []
    v1 = False
    for node in graph.topological_ops():
        if node.id not in keep:
            continue
        if node.soft_get("op") == "Parameter":
            shape = node.soft_get("shape")
            if shape is None:
                raise Error("Input '{}' has no shape; give it with --input_shape.", node.name, faq=56)
            lines.append("input: \"{}\"".format(_input_blob_name(node)))
            lines.append("input_shape {{ {} }}".format(" ".join("dim: {}".format(int(d)) for d in shape)))
            continue
        pb = node.soft_get("pb")
        if pb is None:
            raise Error("Layer '{}' feeds a Caffe-fallback layer but has no Caffe definition.", node.name)
        v1 = v1 or not isinstance(pb.type, str)
        layers.append(pb)
    section = "layers" if v1 else "layer"
    for pb in layers:
        copy = type(pb)()
        copy.CopyFrom(pb)
        del copy.blobs[:]  # weights come from the caffemodel, by name
        lines.append("{} {{\n{}}}".format(section, text_format.MessageToString(copy, indent=2)))
    return "\n".join(lines) + "\n"
