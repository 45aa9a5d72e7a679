"""Caffe-backed layers: run IR layers that only Caffe knows through the Caffe worker.

A legacy IR (CustomLayersMapping.xml) keeps layers in their Caffe type, each with
its own Caffe definition in the IR (the data attribute DEFINITION_ATTR of
core/services/caffe_worker.py, the worker's contract: its prototxt text without
blobs; the blobs are in the .bin). With the daemon's Caffe fallback on (`--caffe-fallback`), each
such layer of a type with no built-in or custom kernel becomes a kernel that sends
its definition, inputs and blobs to a Caffe worker process, which runs exactly
that layer and sends the outputs back. Nothing else of the IR is read: no source
file, no path, no meta data; so the IR runs after the model files are moved or
deleted. `Python` layers import their module only from the directories the
daemon's owner configured (`mo-core daemon start --caffe-fallback --python-path
DIR`), never from anything an IR names. The daemon itself never imports caffe
(nor the converter). Cost: one round trip through ZeroMQ per layer per inference,
plus Caffe's own forward.
"""
from __future__ import annotations

import hashlib
import threading

import numpy as np

from core.microkernel import MicrokernelError, MicrokernelTimeout, WorkerError, WorkerProcess
from core.services import caffe_worker as contract
from ir import IRError, Network

from .kernels import KernelError
from .quarantine import Quarantine, env_number


RESTART_BUDGET, RESTART_WINDOW = 3, 60.0  # restarts per window (then refused until the window moves on)
TIMEOUT_ENV, QUARANTINE_ENV = "MO_CORE_CAFFE_TIMEOUT", "MO_CORE_CAFFE_QUARANTINE_S"


class CaffeWorkerPool:
    """One Caffe worker per daemon, started on first use, restarted on a crash (at most
    RESTART_BUDGET times per RESTART_WINDOW seconds). A request has MO_CORE_CAFFE_TIMEOUT
    seconds (default 60) to run, and as long to wait for the worker (one request at a time:
    another's slow layer makes it wait that long at most); a layer definition the worker
    died or hung running is quarantined (quarantine.py), so one IR does not spend the
    restart budget every client's Caffe-backed layers share.
    `python_path`: the only directories its Python layers may come from."""

    def __init__(self, python_path: list[str] | None = None, timeout: float | None = None):
        self.timeout = timeout or env_number(TIMEOUT_ENV, 60.0, 1.0)
        self.python_path = list(python_path or [])
        self._worker = None
        self._lock = threading.Lock()
        self._quarantine = Quarantine("this Caffe layer", "Caffe worker", QUARANTINE_ENV)  # by its definition

    def call(self, op, args, arrays, key: str = ""):
        with self._lock:
            self._quarantine.check(key)
        # Caffe nets are not thread-safe: one request at a time (the wait bounded: a slow layer held it for minutes)
        if not self._lock.acquire(timeout=self.timeout):
            raise MicrokernelTimeout(f"the daemon's Caffe worker stayed busy with other requests for {self.timeout:g} "
                                     f"s ({TIMEOUT_ENV})")
        try:
            if self._worker is None:
                self._worker = WorkerProcess(
                    contract.WORKER_MODULE, name="caffe", startup_timeout=120, request_timeout=self.timeout,
                    restart_budget=RESTART_BUDGET, restart_window=RESTART_WINDOW,
                    args=contract.worker_args(self.python_path, "configured"),
                    env={"GLOG_minloglevel": "2"}, sandbox=contract.sandbox(python_path=self.python_path))
            try:
                return self._worker.call(op, args, arrays, timeout=self.timeout)
            except (WorkerError, MicrokernelTimeout) as exc:
                self._quarantine.failed(key, exc)
                raise
        finally:
            self._lock.release()

    def stop(self):
        with self._lock:
            if self._worker is not None:
                self._worker.stop()
                self._worker = None
            self._quarantine.clear()


def caffe_backed_kernels(network: Network, pool: CaffeWorkerPool, known_types, custom_types=()) -> dict[str, type]:
    """Kernel classes for the layer types of `network` that have no kernel, and for the
    types mapped in CustomLayersMapping.xml (their layers keep their Caffe definition
    and Caffe's parameters, not the IR's: only Caffe runs them) that no custom kernel
    (`custom_types`, -l / add_extension) takes."""
    mapped = {layer.type for layer in network.layers if contract.DEFINITION_ATTR in layer.data}
    missing = sorted({layer.type for layer in network.layers if layer.type != "Input" and (
        layer.type not in known_types or (layer.type in mapped and layer.type not in custom_types))})
    if not missing:
        return {}

    class CaffeBackedKernel:
        type = missing
        output_is_view = False

        def __init__(self, layer):
            definition = layer.data.get(contract.DEFINITION_ATTR)
            if not definition:
                raise IRError(f"Layer '{layer.name}' ({layer.type}) has no kernel, and the IR holds no Caffe "
                              f"definition of it (attribute '{contract.DEFINITION_ATTR}', which mo-core convert "
                              f"writes for layers mapped in CustomLayersMapping.xml): convert the model again "
                              f"with this version, or give a custom CPU kernel for {layer.type} with -l FILE.")
            self.layer = layer
            self.definition = definition
            self.key = hashlib.sha256(definition.encode("utf-8", "replace")).hexdigest()  # (its quarantine)
            self.blobs = [np.ascontiguousarray(b, dtype=np.float32) for b in layer.blobs.values()]
            self.ir_in = [tuple(p.dims) for p in layer.inputs]
            self.ir_out = [tuple(p.dims) for p in layer.outputs]

        def getMemoryShapes(self, input_shapes):  # noqa: N802 (OpenCV's name)
            shapes = [tuple(s) for s in input_shapes]
            if shapes == self.ir_in:
                return list(self.ir_out)
            zeros = [np.zeros(s, dtype=np.float32) for s in shapes]
            return [tuple(o.shape) for o in self.forward(zeros)]

        def forward(self, inputs):
            args, arrays = contract.forward_layer_request(self.definition, inputs, self.blobs)
            try:
                result, outputs = pool.call(contract.FORWARD_LAYER, args, arrays, self.key)
                outputs = contract.check_forward_layer_result(result, outputs)
            except MicrokernelError as exc:  # an error reply, a crash, a hang, a broken reply
                raise KernelError(self.layer, f"the Caffe worker failed to run it: {exc}") from None
            return [np.array(o) for o in outputs]

    return {t: CaffeBackedKernel for t in missing}
