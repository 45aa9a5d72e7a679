"""TFCustomSubgraphCall layers: TensorFlow sub-graphs the converter offloaded
(core/front/tf/offload.py), run through a TF worker process of this daemon.

The layer is self-contained (ir/schema/tf_subgraph.py): its GraphDef, the
Placeholders that take its inputs and the tensors that are its outputs, NCHW
<-> NHWC inside the graph. The daemon never imports TensorFlow: one TF worker
(fallback_workers/tf_worker) per daemon process, started on the first network
with such a layer, reused by every later one, restarted after a crash (up to
RESTART_BUDGET times), stopped with the daemon (and, should the daemon die
without stopping it, by its own parent-pid watch). The worker is started with
--refuse-io-ops: a graph that would reach files, the network or Python is
refused, since an IR never chooses what runs outside the network's tensors.

Building a network loads each sub-graph into the worker once (TensorFlow
imports it and keeps a callable); each inference is one round trip per layer:
the tensors go through a shared buffer of the kernel (core/microkernel/
shared_buffer.py: a sealed memfd the worker maps), only a small header on the
socket, sent and awaited on the computing thread (MO_CORE_SHM=0, or no memfd:
raw frames instead). After the first such run a layer binds its runs with the
worker (bind_run: the buffer's views made and checked once there), and each later
run is an 8-byte raw datagram over the worker's fast-lane Unix socket (fallback_
workers/tf_worker/bound_runs.py); anything unusual (a binding the worker lost, a
failed run) goes back to the plain request, which reports why. A worker that
restarted has forgotten the sub-graphs and bindings: they are made again on first use.
MO_CORE_TF_PYTHON chooses the worker's interpreter (a venv with TensorFlow);
MO_CORE_TF_TIMEOUT (seconds, default 600) bounds each request.
"""
from __future__ import annotations

import base64
import binascii
import os
import threading
import time

import numpy as np

from core.microkernel import MicrokernelError, MicrokernelTimeout, RemoteError, WorkerError, WorkerProcess
from core.microkernel import shared_buffer
from core.microkernel.shared_buffer import SharedBuffer
from core.services import tf_worker as contract

from .kernels.base import Kernel, register

RESTART_BUDGET = 5
SPIN_S = float(os.environ.get("MO_CORE_SPIN_US", "500")) / 1e6  # as the daemon polls for its clients


class TFWorkerPool:
    """The daemon's TF worker (one per process, see the module doc)."""

    def __init__(self):
        self._worker: WorkerProcess | None = None
        self._loaded: set[str] = set()
        self._pid = None
        self._lock = threading.Lock()

    @staticmethod
    def timeout() -> float:
        try:
            return max(1.0, float(os.environ.get(contract.TIMEOUT_ENV, "600")))
        except ValueError:
            return 600.0

    def _get(self) -> WorkerProcess:
        with self._lock:
            if self._worker is None:
                self._worker = WorkerProcess(
                    contract.WORKER_MODULE, name="tf", interpreter=contract.worker_python(), startup_timeout=180,
                    request_timeout=self.timeout(), restart_budget=RESTART_BUDGET, args=[contract.REFUSE_IO_OPS],
                    env=contract.WORKER_ENV, threads=2)
            return self._worker

    @property
    def pid(self) -> int | None:
        with self._lock:
            return self._worker.pid if self._worker is not None else None

    def _call(self, op, args, arrays, direct: bool = False, spin: float = 0.0):
        worker = self._get()
        # runs go on the calling thread (no hand-off to the client's I/O thread), to the worker's fast lane
        # (no hand-off to a pool thread there either)
        result = worker.call(op, args, arrays, timeout=self.timeout(), direct=direct, spin=spin,
                             lane="fast" if direct else "main")
        with self._lock:
            if worker.pid != self._pid:  # a new incarnation knows no sub-graph yet
                self._pid = worker.pid
                self._loaded = set()
        return result

    def load(self, kernel: "TFSubgraphKernel") -> None:
        if kernel.graph_id in self._loaded and self.pid == self._pid:
            return
        args, arrays = contract.load_subgraph_request(kernel.graph_id, kernel.graph, kernel.input_names,
                                                      kernel.output_names)
        result, _ = self._call(contract.LOAD_SUBGRAPH, args, arrays)
        contract.check_load_subgraph_result(result, kernel.input_names, kernel.output_names)
        with self._lock:
            self._loaded.add(kernel.graph_id)

    def bind(self, kernel: "TFSubgraphKernel", args: dict) -> int:
        """bind_run on the worker's fast lane: the binding id."""
        result, _ = self._call(contract.BIND_RUN, args, [], direct=True)
        return contract.check_bind_run_result(result)

    def run_bound(self, kernel: "TFSubgraphKernel", binding: int) -> int | None:
        """A bound run (the raw verb RAW_RUN): its status, None when the worker's lane
        has no raw verbs (the plain request then, for good)."""
        spin = SPIN_S if kernel.reply_s < SPIN_S else 0.0
        start = time.perf_counter()
        reply = self._get().call_raw(contract.RAW_RUN, contract.RUN_REQUEST.pack(binding), self.timeout(),
                                     spin=spin, lane="fast", op=contract.RUN_SUBGRAPH)
        kernel.reply_s = time.perf_counter() - start
        if reply is None or len(reply) != contract.RUN_REPLY.size:
            return None
        return contract.RUN_REPLY.unpack(reply)[0]

    def run(self, kernel: "TFSubgraphKernel", args: dict, arrays: list) -> tuple[dict, list]:
        """A run_subgraph request for the kernel's sub-graph (loaded again if the worker forgot it).
        Polls for the reply (SPIN_S) only when the kernel's last reply came within that time: a spinning
        thread holds a core that TensorFlow's threads wait for during longer runs (measured: +0.6 ms on an
        Erf layer of 1x56x56x64 on 2 cores)."""
        spin = SPIN_S if kernel.reply_s < SPIN_S else 0.0
        start = time.perf_counter()
        try:
            result = self._call(contract.RUN_SUBGRAPH, args, arrays, direct=True, spin=spin)
        except RemoteError as exc:
            if exc.kind != contract.UNKNOWN_SUBGRAPH:
                raise
            with self._lock:
                self._loaded.discard(kernel.graph_id)
            self.load(kernel)
            start = time.perf_counter()
            result = self._call(contract.RUN_SUBGRAPH, args, arrays, direct=True, spin=spin)
        kernel.reply_s = time.perf_counter() - start
        return result

    def stop(self) -> None:
        with self._lock:
            worker, self._worker, self._loaded = self._worker, None, set()
        if worker is not None:
            worker.stop()


_POOL = TFWorkerPool()


def worker_pool() -> TFWorkerPool:
    return _POOL


def stop_worker() -> None:
    """Stops this process's TF worker (the daemon's cleanup)."""
    _POOL.stop()


@register("TFCustomSubgraphCall")
class TFSubgraphKernel(Kernel):
    output_is_view = False
    reuses_output = True  # (shared path) its outputs are read where the worker wrote them

    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.input_names = [n for n in a["input_nodes_names"].split(",") if n]
        self.output_names = [n for n in a["output_tensors_names"].split(",") if n]
        if len(self.input_names) != len(layer.inputs) or len(self.output_names) != len(layer.outputs):
            raise self.error(f"names {len(self.input_names)} input Placeholder(s) and {len(self.output_names)} "
                             f"output tensor(s) for {len(layer.inputs)} input and {len(layer.outputs)} output ports")
        try:
            self.graph = base64.b64decode(a["protobuf"].encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise self.error("its attribute 'protobuf' is not base64 text of a GraphDef; the IR is damaged, convert "
                             "the model again") from None
        self.graph_id = contract.subgraph_id(self.graph, self.input_names, self.output_names)
        self.ir_in = [tuple(p.dims) for p in sorted(layer.inputs, key=lambda p: p.id)]
        self.ir_out = [tuple(p.dims) for p in sorted(layer.outputs, key=lambda p: p.id)]
        self.out_shapes = list(self.ir_out)
        self.buffer: SharedBuffer | None = None   # this kernel's (a plan runs one request at a time)
        self.reply_s = 0.0  # how long its last run_subgraph took (TFWorkerPool.run: whether to poll)
        self.binding: tuple | None = None  # (id, input shapes, placed outputs) of its bound runs
        self.bindable = True  # False once the worker would not bind (then plain requests only)
        self.shared = shared_buffer.available() and os.environ.get("MO_CORE_SHM", "1") != "0"
        self.pool = worker_pool()
        self._guard(self.pool.load, self)

    def getMemoryShapes(self, input_shapes):  # noqa: N802 (OpenCV's name)
        shapes = [tuple(int(d) for d in s) for s in input_shapes]
        if shapes == self.ir_in:
            self.out_shapes = list(self.ir_out)
        else:  # other input shapes (another batch): TensorFlow says, on zeros
            self.out_shapes = [tuple(o.shape) for o in self._run([np.zeros(s, dtype=np.float32) for s in shapes])]
        return list(self.out_shapes)

    def forward(self, inputs):
        return self._run([np.ascontiguousarray(x, dtype=np.float32) for x in inputs])

    def _run(self, inputs: list) -> list:
        if self.shared:
            outputs = self._guard(self._run_shared, inputs)
            if outputs is not None:
                return outputs
        args, arrays = contract.run_subgraph_request(self.graph_id, inputs)
        _, outputs = self._guard(self.pool.run, self, args, arrays)
        outputs = contract.check_run_subgraph_result(outputs, len(self.output_names))
        # (frames arrive read-only; the plan may compute the next layer in place)
        return [np.array(o, dtype=np.float32) for o in outputs]

    def _run_shared(self, inputs: list) -> list | None:
        """Tensors through a shared buffer (shared_buffer.py), only the header on the socket;
        None when the outputs did not fit (frames then)."""
        in_offsets, out_start = shared_buffer.place([x.shape for x in inputs])
        _, end = shared_buffer.place(self.out_shapes, out_start)
        if end > contract.MAX_SHARED_BYTES:
            return None
        if self.buffer is None or self.buffer.size < end:
            if self.buffer is not None:
                self.buffer.close()
            self.buffer = SharedBuffer(end)
            self.binding = None
        for offset, x in zip(in_offsets, inputs):
            np.copyto(self.buffer.view(offset, x.shape), x)
        bound = self.binding
        if bound is not None and bound[1] == [x.shape for x in inputs]:
            try:
                status = self.pool.run_bound(self, bound[0])
            except RemoteError:  # the worker serves no raw verbs after all
                status = None
            if status == contract.RUN_OK:
                return [self.buffer.view(offset, shape) for offset, shape in bound[2]]
            # lost (a new worker, an evicted graph): bound again after the plain request; failed (TensorFlow's
            # error, outputs of other shapes): the plain request says why, and runs stay plain
            self.binding = None
            self.bindable = status == contract.RUN_UNKNOWN
        args, arrays = contract.run_subgraph_shm_request(self.graph_id, self.buffer.spec,
                                                         [(o, x.shape) for o, x in zip(in_offsets, inputs)],
                                                         out_start)
        try:
            result, _ = self.pool.run(self, args, arrays)
        except RemoteError as exc:
            if exc.kind == contract.SHM:  # (a shape TensorFlow computes larger than said): frames this time
                return None
            raise
        placed = contract.check_placed(result, len(self.output_names), self.buffer.size)
        if self.bindable:
            self._bind(in_offsets, inputs, placed)
        # views: the plan copies a network output out of the buffer before its next run (reuses_output); a
        # consumer that computes in place writes into the buffer, which the next run overwrites anyway
        return [self.buffer.view(offset, shape) for offset, shape in placed]

    def _bind(self, in_offsets: list, inputs: list, placed: list) -> None:
        """Bind the next runs of these shapes (best effort: plain requests otherwise)."""
        args = contract.bind_run_request(self.graph_id, self.buffer.spec,
                                         [(o, x.shape) for o, x in zip(in_offsets, inputs)], placed)
        try:
            self.binding = (self.pool.bind(self, args), [x.shape for x in inputs], placed)
        except RemoteError:  # e.g. inputs that are not float32 in the graph
            self.bindable = False

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except RemoteError as exc:
            if exc.kind == contract.FRAMEWORK_MISSING:
                raise self.error(f"it runs in TensorFlow, which the daemon's TF worker cannot import: {exc.message}. "
                                 f"Install TensorFlow where the daemon runs (pip install tensorflow-cpu==2.21.0), or "
                                 f"start the daemon with {contract.TF_PYTHON_ENV}=<a python that has it>") from None
            raise self.error(f"TensorFlow could not run it ({exc.kind}): {exc.message}") from None
        except MicrokernelTimeout as exc:
            raise self.error(f"the TF worker did not answer in time: {exc}") from None
        except WorkerError as exc:
            raise self.error(f"the TF worker failed: {exc}. The next request starts a new one") from None
        except MicrokernelError as exc:  # a broken reply or link
            raise self.error(f"the TF worker failed: {exc}") from None
