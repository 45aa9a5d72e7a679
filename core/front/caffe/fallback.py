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


def python_layer_sources(directories, modules) -> list[str]:
    """The files (module.py) and package directories of the Python layers' modules
    found in `directories`: what the sandboxed Caffe worker is shown of them, so that
    the code shipped with a model sees nothing else of the model's directories."""
    found = []
    for directory in directories:
        for module in modules:
            top = os.path.join(directory, module.split(".")[0])
            for path, exists in ((top + ".py", os.path.isfile), (top, os.path.isdir)):
                if exists(path) and path not in found:
                    found.append(path)
    return found


class CaffeFallback:
    def __init__(self, enabled: bool, weights: str | None, search_paths=(), timeout: float | None = None,
                 given: dict | None = None, source: str | None = None, modules=()):
        """`search_paths`: where the model's Python layers are imported from (the model's
        directories); `modules`: those layers' modules - the worker's sandbox shows it
        their files (python_layer_sources), not the directories' other files."""
        self.enabled = enabled
        self.modules = list(modules)
        self.given = dict(given or {})   # --fallback_input: {input name: array} Caffe runs on instead of noise
        self.source = source
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
        from core.microkernel import MicrokernelError, ProtocolError, RemoteError, WorkerError, WorkerProcess
        from core.services import caffe_worker as contract
        targets = self._targets(graph)
        text = subnet_prototxt(graph, targets)
        names = [n.name for n in targets]
        given = self._given_blobs(graph)
        # the model's own directories are where its Python layers live (the user's model:
        # any module Caffe finds, as pycaffe itself would import it)
        worker = WorkerProcess(contract.WORKER_MODULE, name="caffe", startup_timeout=120,
                               request_timeout=self.timeout, restart_budget=0,
                               args=contract.worker_args(self.search_paths, "any"), env={"GLOG_minloglevel": "2"},
                               sandbox=contract.sandbox(self.weights,
                                                        python_layer_sources(self.search_paths, self.modules)))
        layer_list = ", ".join(names)
        try:
            result, _ = worker.call(contract.INFER_SHAPES,
                                    contract.infer_shapes_request(text, self.weights, names, seed=0,
                                                                  given=list(given)),
                                    list(given.values()), timeout=self.timeout)
            shapes = contract.check_infer_shapes_result(result, names)
        except WorkerError as exc:
            raise Error("Cannot infer shapes due to exception in Caffe for layer(s) {}: the Caffe worker {}.\n"
                        "Caffe said: {}", layer_list, exc.exit_status or "failed",
                        caffe_message(exc.stderr_tail) or "(nothing)", faq=13) from None
        except RemoteError as exc:
            if exc.kind == contract.FRAMEWORK_MISSING:
                raise Error("Cannot infer shape for node(s) {} because there is no Caffe available. {} Please "
                            "register python infer function for op or use Caffe for shape inference.",
                            layer_list, exc.message, faq=14) from None
            raise Error("Caffe fallback for layer(s) {}: {}", layer_list, exc.message, faq=exc.faq or 13) from None
        except ProtocolError as exc:
            raise Error("Caffe fallback for layer(s) {}: {}", layer_list, exc, faq=13) from None
        except MicrokernelError as exc:  # timeouts and transport failures
            raise Error("Caffe fallback for layer(s) {} failed: {}. If Caffe is only slow on this net, allow it more "
                        "time with MO_CORE_FALLBACK_TIMEOUT=SECONDS (now {:g}).", layer_list, exc, self.timeout,
                        faq=13) from None
        finally:
            worker.stop()
        self.shapes = shapes
        self.stats["round_trips"] += 1
        self.stats["layers"] += len(names)
        self._log(targets, result.get("fed") or {})

    def _given_blobs(self, graph) -> dict:
        """--fallback_input by the blob names of the sub-net's inputs."""
        given = {}
        for node in graph.op_nodes(op="Parameter"):
            if node.name in self.given:
                given[_input_blob_name(node)] = np.ascontiguousarray(self.given[node.name], dtype=np.float32)
        return given

    def _log(self, targets, fed: dict):
        listing = ", ".join("'{}' ({})".format(n.name, n.caffe_type) for n in targets)
        noise = sorted(name for name, how in fed.items() if how == "noise")
        given = sorted(name for name, how in fed.items() if how == "given")
        inputs = (["{} from {}".format(", ".join(given), self.source or "--fallback_input")] if given else []) + \
                 (["seeded noise for {}".format(", ".join(noise))] if noise else [])
        log.info("The output shapes of %s come from Caffe (Caffe worker), run on %s.", listing,
                 " and ".join(inputs) or "no input")
        if not noise:
            return
        for n in targets:
            kind = n.caffe_type
            if kind in DATA_DEPENDENT or (kind == "Python" and any(
                    w in n.pb.python_param.layer for w in ("Proposal", "Detection", "NMS"))):
                log.warning("The output shape of layer '%s' (%s) computed by the Caffe fallback may depend on the "
                            "input data: Caffe ran it on seeded noise. Check the shape in the IR, give a real input "
                            "with --fallback_input x.npy, or write an extension with an infer function for it.",
                            n.name, kind)


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


def layer_definition(pb) -> str:
    """A layer's own Caffe definition: its prototxt text without blobs (they are in
    the .bin), on one line, as `layer { ... }` (`layers { ... }` for the V1 format).
    An IR keeps it for layers that keep their Caffe type (see the README's IR notes),
    so the daemon runs them through Caffe without the source files."""
    copy = type(pb)()
    copy.CopyFrom(pb)
    del copy.blobs[:]
    section = "layer" if isinstance(pb.type, str) else "layers"
    return "{} {{ {} }}".format(section, text_format.MessageToString(copy, as_one_line=True))


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
        layers.append(layer_definition(pb))  # weights come from the caffemodel, by name
    return "\n".join(lines + layers) + "\n"
