"""TFCustomSubgraphCall layers: TensorFlow sub-graphs the converter offloaded
(core/front/tf/offload.py), run by a small pool of TF worker processes of this
daemon.

The layer is self-contained (ir/schema/tf_subgraph.py): its GraphDef, the
Placeholders that take its inputs and the tensors that are its outputs, NCHW
<-> NHWC inside the graph. The daemon never imports TensorFlow: its TF workers
(fallback_workers/tf_worker) run in the OS sandbox (core/microkernel/sandbox.py)
and check every graph against the allow-list (core/services/tf_ops.py) before
TensorFlow imports it: a graph that would reach files, the network, Python or
the process is a load error.

Fairness between clients: MO_CORE_TF_WORKERS workers (default 2), started on
first use; a request takes an idle one (the one that already has its graph and
buffer, if idle), so one slow graph holds one worker, not everyone's offloaded
layers. Every request has a deadline (MO_CORE_TF_TIMEOUT, seconds, default 30:
an offloaded layer is a layer of a network, not a batch job); a worker that
misses it is killed. A worker that dies or hangs is restarted on its next use,
at most RESTART_BUDGET times per RESTART_WINDOW seconds (then refused for the
rest of the window, not for good), and the graph it was running is quarantined
for MO_CORE_TF_QUARANTINE_S seconds (default 300; 0: never): its loads and runs
are refused at once with the reason, so one IR cannot spend everyone's budget.

The path to a worker is one: the worker's local carrier, its Unix socket (core/
microkernel/direct.py: the connection's own thread in the worker receives, runs
and replies), as the daemon's clients reach the daemon; its main socket over
ZeroMQ only for a message too large for a datagram or a connection the worker
refused.
Building a network loads each sub-graph into a worker (TensorFlow imports it
and keeps a callable; another worker loads it again on first use there); each
inference is one round trip per layer: the tensors go through a shared buffer
of the kernel (core/microkernel/shared_buffer.py: a sealed memfd whose
descriptor the worker is handed once, RAW_SHARE), only a small header on the
socket (MO_CORE_SHM=0, or no memfd: raw frames instead). After the first such
run on a worker a layer binds its runs there (bind_run), and each later run is
an 8-byte raw datagram (fallback_workers/tf_worker/bound_runs.py); anything
unusual (a binding the worker lost, a failed run) goes back to the plain
request, which reports why. MO_CORE_TF_PYTHON chooses the workers' interpreter.
"""
from __future__ import annotations

import base64
import binascii
import contextlib
import os
import threading
import time

import numpy as np

from core.microkernel import MicrokernelError, MicrokernelTimeout, RemoteError, WorkerError, WorkerProcess
from core.microkernel import shared_buffer

from .. import bound_protocol as bound
from core.microkernel.sandbox import Sandbox
from core.microkernel.shared_buffer import SharedBuffer
from core.services import tf_worker as contract

from .kernels.base import Kernel, register
from .quarantine import Quarantine, env_number

RESTART_BUDGET, RESTART_WINDOW = 5, 60.0
WORKER_NAME = "tfd"  # (its sockets' directory names it: w<daemon pid>-tfd-<random>)
WORKERS_ENV, QUARANTINE_ENV = "MO_CORE_TF_WORKERS", "MO_CORE_TF_QUARANTINE_S"
DEFAULT_TIMEOUT, LOAD_TIMEOUT = 30.0, 120.0
SPIN_S = bound.SPIN_S  # as the daemon polls for its clients


class _Slot:
    """One worker of the pool: its process (started on first use) and what it holds."""

    def __init__(self, index: int):
        self.index = index
        self.worker: WorkerProcess | None = None
        self.pid: int | None = None     # the incarnation `loaded` belongs to
        self.loaded: set[str] = set()
        self.busy = False

    def get(self, timeout: float) -> WorkerProcess:
        if self.worker is None:
            self.worker = WorkerProcess(
                contract.WORKER_MODULE, name=WORKER_NAME, interpreter=contract.worker_python(), startup_timeout=180,
                request_timeout=timeout, restart_budget=RESTART_BUDGET, restart_window=RESTART_WINDOW,
                env=contract.WORKER_ENV, sandbox=Sandbox())
        return self.worker


class TFWorkerPool:
    """The daemon's TF workers (see the module doc); kernels call through a slot_for()."""

    def __init__(self, size: int | None = None):
        self.size = size or int(env_number(WORKERS_ENV, 2, 1))
        self._slots = [_Slot(i) for i in range(self.size)]
        self._cond = threading.Condition()
        self._quarantine = Quarantine("this sub-graph", "TF worker", QUARANTINE_ENV)  # by graph id

    @staticmethod
    def timeout() -> float:
        return env_number(contract.TIMEOUT_ENV, DEFAULT_TIMEOUT, 1.0)

    # ----------------------------------------------------------------- slots
    @contextlib.contextmanager
    def slot_for(self, kernel: "TFSubgraphKernel"):
        """An idle worker slot for the kernel's next request (its last one if idle, else
        one that has its graph, else any); waits while all are busy, up to the timeout."""
        deadline = time.monotonic() + self.timeout()
        with self._cond:
            while True:
                self._quarantine.check(kernel.graph_id)
                idle = [s for s in self._slots if not s.busy]
                if idle:
                    slot = min(idle, key=lambda s: (s is not kernel.slot, kernel.graph_id not in s.loaded,
                                                    s.worker is None, s.index))
                    slot.busy = True
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise MicrokernelTimeout(f"all {self.size} TF workers stayed busy for {self.timeout():g} s "
                                             f"({contract.TIMEOUT_ENV}; more workers: {WORKERS_ENV})")
                self._cond.wait(left)
        try:
            yield slot
        finally:
            with self._cond:
                slot.busy = False
                self._cond.notify()

    def _failed(self, kernel, exc: Exception) -> None:
        """The worker died or hung running the kernel's graph: the graph is quarantined."""
        with self._cond:
            self._quarantine.failed(kernel.graph_id, exc)

    def call(self, slot: _Slot, kernel, op, args, arrays, timeout: float | None = None, spin: float = 0.0):
        """A verb on the slot's worker, on its one path (its local carrier). A death or a hang
        quarantines the kernel's graph."""
        t = timeout or self.timeout()
        worker = slot.get(t)
        try:
            result = worker.call(op, args, arrays, timeout=t, direct=True, spin=spin, lane="local")
        except (WorkerError, MicrokernelTimeout) as exc:
            self._failed(kernel, exc)
            raise
        self._note_incarnation(slot, worker)
        return result

    @staticmethod
    def _note_incarnation(slot: _Slot, worker: WorkerProcess) -> None:
        if worker.pid != slot.pid:  # a new incarnation knows no sub-graph yet
            slot.pid, slot.loaded = worker.pid, set()

    def call_raw(self, slot: _Slot, kernel, tag: int, payload: bytes, op: str, spin: float = 0.0, fds=()):
        worker = slot.get(self.timeout())
        try:
            return worker.call_raw(tag, payload, self.timeout(), spin=spin, op=op, fds=fds)
        except (WorkerError, MicrokernelTimeout) as exc:
            self._failed(kernel, exc)
            raise

    # ----------------------------------------------------------------- verbs
    def load(self, slot: _Slot, kernel: "TFSubgraphKernel") -> None:
        if kernel.graph_id in slot.loaded and slot.worker is not None and slot.worker.pid == slot.pid:
            return
        args, arrays = contract.load_subgraph_request(kernel.graph_id, kernel.graph, kernel.input_names,
                                                      kernel.output_names)
        result, _ = self.call(slot, kernel, contract.LOAD_SUBGRAPH, args, arrays,
                              timeout=max(self.timeout(), LOAD_TIMEOUT))
        contract.check_load_subgraph_result(result, kernel.input_names, kernel.output_names)
        slot.loaded.add(kernel.graph_id)

    def share(self, slot: _Slot, kernel, buffer: SharedBuffer) -> int | None:
        """Hands the buffer's descriptor to the slot's worker (RAW_SHARE); the pid of the
        worker that has it now, None when it has no local carrier to pass it over."""
        reply = self.call_raw(slot, kernel, contract.RAW_SHARE, contract.share_request(buffer.spec), "share",
                              fds=[buffer.fd])
        return None if reply is None else slot.worker.pid

    def bind(self, slot: _Slot, kernel, args: dict) -> int:
        """bind_run: the binding id."""
        result, _ = self.call(slot, kernel, contract.BIND_RUN, args, [])
        return contract.check_bind_run_result(result)

    def run_bound(self, slot: _Slot, kernel: "TFSubgraphKernel", binding: int) -> int | None:
        """A bound run (the raw verb RAW_RUN): its status, None when the worker
        has no raw verbs (the plain request then, for good)."""
        spin = SPIN_S if kernel.reply_s < SPIN_S else 0.0
        start = time.perf_counter()
        reply = self.call_raw(slot, kernel, contract.RAW_RUN, contract.RUN_REQUEST.pack(binding),
                              contract.RUN_SUBGRAPH, spin=spin)
        kernel.reply_s = time.perf_counter() - start
        if reply is None or len(reply) != contract.RUN_REPLY.size:
            return None
        return contract.RUN_REPLY.unpack(reply)[0]

    def run(self, slot: _Slot, kernel: "TFSubgraphKernel", args: dict, arrays: list) -> tuple[dict, list]:
        """A run_subgraph request for the kernel's sub-graph (loaded again if the worker forgot it).
        Polls for the reply (SPIN_S) only when the kernel's last reply came within that time: a spinning
        thread holds a core that TensorFlow's threads wait for during longer runs (measured: +0.6 ms on an
        Erf layer of 1x56x56x64 on 2 cores)."""
        spin = SPIN_S if kernel.reply_s < SPIN_S else 0.0
        self.load(slot, kernel)
        start = time.perf_counter()
        try:
            result = self.call(slot, kernel, contract.RUN_SUBGRAPH, args, arrays, spin=spin)
        except RemoteError as exc:
            if exc.kind != contract.UNKNOWN_SUBGRAPH:
                raise
            slot.loaded.discard(kernel.graph_id)
            self.load(slot, kernel)
            start = time.perf_counter()
            result = self.call(slot, kernel, contract.RUN_SUBGRAPH, args, arrays, spin=spin)
        kernel.reply_s = time.perf_counter() - start
        return result

    def pids(self) -> list[int]:
        return [s.worker.pid for s in self._slots if s.worker is not None and s.worker.pid is not None]

    def stop(self) -> None:
        with self._cond:
            workers = [s.worker for s in self._slots if s.worker is not None]
            self._slots = [_Slot(i) for i in range(self.size)]
            self._quarantine.clear()
        for worker in workers:
            worker.stop()


_POOL = TFWorkerPool()


def worker_pool() -> TFWorkerPool:
    return _POOL


def stop_worker() -> None:
    """Stops this process's TF workers (the daemon's cleanup)."""
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
        self.shared_with = None  # the pid of the worker that has the buffer's descriptor
        self.reply_s = 0.0  # how long its last run_subgraph took (TFWorkerPool.run: whether to poll)
        self.binding: tuple | None = None  # (id, input shapes, placed outputs, worker pid) of its bound runs
        self.bindable = True  # False once the worker would not bind (then plain requests only)
        self.shared = shared_buffer.available() and os.environ.get("MO_CORE_SHM", "1") != "0"
        self.pool = worker_pool()
        self.slot = None  # the pool's slot its last request went to
        self._guard(self._load)

    def _load(self):
        with self.pool.slot_for(self) as slot:
            self.slot = slot
            self.pool.load(slot, self)

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
        return self._guard(self._run_on_slot, inputs)

    def _run_on_slot(self, inputs: list) -> list:
        with self.pool.slot_for(self) as slot:
            self.slot = slot
            if self.shared:
                outputs = self._run_shared(slot, inputs)
                if outputs is not None:
                    return outputs
            args, arrays = contract.run_subgraph_request(self.graph_id, inputs)
            _, outputs = self.pool.run(slot, self, args, arrays)
        outputs = contract.check_run_subgraph_result(outputs, len(self.output_names))
        # (frames arrive read-only; the plan may compute the next layer in place)
        return [np.array(o, dtype=np.float32) for o in outputs]

    def _run_shared(self, slot, inputs: list) -> list | None:
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
            self.shared_with = None
        self.pool.load(slot, self)
        if self.shared_with is None or self.shared_with != slot.worker.pid:
            self.shared_with = self.pool.share(slot, self, self.buffer)
            if self.shared_with is None:  # no Unix socket to pass it on: frames from now on
                self.shared = False
                return None
        for offset, x in zip(in_offsets, inputs):
            np.copyto(self.buffer.view(offset, x.shape), x)
        bound = self.binding
        if bound is not None and bound[1] == [x.shape for x in inputs] and bound[3] == slot.worker.pid:
            try:
                status = self.pool.run_bound(slot, self, bound[0])
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
            try:
                result, _ = self.pool.run(slot, self, args, arrays)
            except RemoteError as exc:
                if exc.kind != contract.UNSHARED:
                    raise
                self.shared_with = self.pool.share(slot, self, self.buffer)  # a new worker, or it let the buffer go
                result, _ = self.pool.run(slot, self, args, arrays)
        except RemoteError as exc:
            if exc.kind == contract.SHM:  # (a shape TensorFlow computes larger than said): frames this time
                return None
            raise
        placed = contract.check_placed(result, len(self.output_names), self.buffer.size)
        if self.bindable:
            self._bind(slot, in_offsets, inputs, placed)
        # views: the plan copies a network output out of the buffer before its next run (reuses_output); a
        # consumer that computes in place writes into the buffer, which the next run overwrites anyway
        return [self.buffer.view(offset, shape) for offset, shape in placed]

    def _bind(self, slot, in_offsets: list, inputs: list, placed: list) -> None:
        """Bind the next runs of these shapes (best effort: plain requests otherwise)."""
        args = contract.bind_run_request(self.graph_id, self.buffer.spec,
                                         [(o, x.shape) for o, x in zip(in_offsets, inputs)], placed)
        try:
            self.binding = (self.pool.bind(slot, self, args), [x.shape for x in inputs], placed, slot.worker.pid)
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
            if exc.kind == "quarantined":
                raise self.error(exc.message) from None
            raise self.error(f"TensorFlow could not run it ({exc.kind}): {exc.message}") from None
        except MicrokernelTimeout as exc:
            raise self.error(f"the TF worker did not answer in time: {exc}") from None
        except WorkerError as exc:
            raise self.error(f"the TF worker failed: {exc}. The next request starts a new one") from None
        except MicrokernelError as exc:  # a broken reply or link
            raise self.error(f"the TF worker failed: {exc}") from None
