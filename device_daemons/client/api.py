"""The client of the device daemons, in the shape of the Inference Engine Python API:

    from device_daemons.client import IECore
    ie = IECore(policy="auto")          # "auto": start a daemon if none runs; "existing": never
    net = ie.read_network(model="m.xml", weights="m.bin")   # validated here with ir.read_ir
    net.batch_size = 4                  # optional; net.inputs / net.outputs: {name: shape}
    ie.add_extension("my_layers.py", "CPU")                  # custom CPU kernels, before load
    exec_net = ie.load_network(net, "CPU")   # config={"INFERENCE_PRECISION_HINT": "f32", ...}
    exec_net.get_config("INFERENCE_PRECISION_HINT")          # what it got: "bf16" where the CPU has it
    res = exec_net.infer({"data": x})   # {output name: np.ndarray}
    req = exec_net.start_async({"data": x}); req.wait(); req.outputs

Load config (OpenVINO's keys; IECore.set_config gives a device's defaults):
PERF_COUNT (YES|NO), and for the CPU INFERENCE_PRECISION_HINT (f32 | bf16; the
default is bf16 where the CPU has AVX512_BF16 or AMX, as OpenVINO's) and
INFERENCE_NUM_THREADS (default: the CPUs of the daemon's affinity mask).
get_config / get_metric read what the network got, with
OPTIMAL_NUMBER_OF_INFER_REQUESTS.

The daemon is found through its record in the runtime directory (registry.py) or
given explicitly (`IECore(endpoint=..., key_file=...)`, e.g. a daemon on another
machine behind an HMAC key). For a local daemon the IR travels as file paths; for
a remote one (or `transfer="content"`) the .xml text and the .bin bytes are sent.

Failure handling, every call has a timeout (IECore(timeout=...), default 120 s):
* while a request waits, the daemon process is watched (local daemons): if it dies,
  the request fails at once with DaemonDied saying so - with the exit status when
  this process started it, and its log - and whether the next request restarts it;
* the next request reconnects: to the daemon that runs now (someone restarted it)
  or, with the "auto" policy, to a newly started one; networks are re-loaded on the
  new daemon transparently (the client remembers how each was loaded);
* no reply in time: DaemonTimeout (the daemon is shared, so it is not killed);
* errors of the request itself (bad input name or shape, unknown layer type, a
  failing custom kernel) are InferenceError with the daemon's message.
All of these derive from core.errors.Error: the CLI prints them as `[ ERROR ]`.

How a request travels is request_path.py's one decision: with a daemon on this
machine, over its local carrier (a Unix socket; inputs and outputs in a slot of
shared memory the daemon makes, a sealed memfd; the request an 8-byte datagram),
else - and for whatever the carrier does not take - over ZeroMQ with the arrays as
message frames. IECore(shared_memory=False) or MO_CORE_SHM=0 leave the carrier
out; anything unusual (no memfd, a daemon in another container) falls back by
itself. Asynchronous requests (start_async) run the same way on a thread of the
network's own.

Thread safety: an ExecutableNetwork may be used by any number of threads at once
(each thread has its own connection to the daemon). Outputs that came through
shared memory are views of a slot, which is reused only after they are garbage;
outputs that came as frames are read-only arrays over the received message
buffers (`.copy()` one to modify it).

This module holds the user API; the machinery behind it: transport.py (the link
to a daemon: connections, failure detection, restarts and reconnects),
request_path.py (how a request travels), bound_client.py and shm_client.py (the
local carrier's bound requests and shared memory), contract.py (what every
request and reply must be), errors.py (InferenceError, daemon error replies).
"""
from __future__ import annotations

import concurrent.futures
import os
import threading
import time
import weakref
from typing import Any

import numpy as np

from core.errors import Error
from core.microkernel import MicrokernelError, ProtocolError, RemoteError, is_loopback
from ir import IRError, read_ir

from .. import contract
from ..plan_io import output_ports
from ..shm_protocol import align
from . import daemon as _daemon
from . import reaper, request_path
from .bound_client import BoundRequests
from .daemon import DaemonDied, DaemonError, DaemonNotRunning, DaemonTimeout
from .errors import InferenceError, remote_error
from .ie_info import DataPtr, InputInfo, RequestIdioms, StatusCode, take_input_settings, to_ir_layout
from .perf_counts import perf_counts
from .request_ids import request_index
from .transport import Connection, Deadline, Link, LinkSettings

__all__ = ["IECore", "IENetwork", "ExecutableNetwork", "InferRequest", "InferenceError",
           "DaemonError", "DaemonDied", "DaemonNotRunning", "DaemonTimeout", "StatusCode"]

POLICIES = ("auto", "existing")


# --------------------------------------------------------------------------- network

def _output_names(network, extra=()) -> dict[str, list]:
    """{output name: dims} named as the plans name them ("layer" / "layer.port")."""
    return {key: list(port.dims) for key, _, port in output_ports(network, extra)}


class IENetwork:
    """An IR read and validated locally (ir.read_ir): names, shapes, batch."""

    def __init__(self, model: str, weights: str | None = None):
        self.model = os.path.abspath(os.fspath(model))
        self.weights = os.path.abspath(os.fspath(weights)) if weights else \
            os.path.splitext(self.model)[0] + ".bin"
        self._ir = read_ir(self.model, self.weights)
        self.name = self._ir.name
        self._ir_inputs = {layer.name: list(layer.outputs[0].dims) for layer in self._ir.inputs()}
        self._ir_outputs = _output_names(self._ir)
        first = next(iter(self._ir_inputs.values()), None)
        self._ir_batch = first[0] if first else self._ir.batch
        self._batch: int | None = None
        self._shapes: dict[str, list] = {}
        self._extra: list[str] = []
        self.affinity: dict[str, str] = {}  # layer name -> device, for HETERO (IE's layer.affinity)
        self._input_precision: dict[str, str] = {}  # input_info's settings (ie_info.py)
        self._input_layout: dict[str, str] = {}

    @property
    def input_info(self) -> dict[str, InputInfo]:
        """IE's input_info: {name: InputInfo} (input_data.shape; precision and layout to set)."""
        return {name: InputInfo(self, name) for name in self._ir_inputs}

    def add_outputs(self, names) -> None:
        """Return the outputs of these layers too (IE's IENetwork.add_outputs)."""
        names = [names] if isinstance(names, str) else list(names)
        try:
            self._ir_outputs = _output_names(self._ir, self._extra + names)
        except IRError as exc:
            raise Error("add_outputs: {}", exc.message) from None
        self._extra += [n for n in names if n not in self._extra]

    @property
    def inputs(self) -> dict[str, DataPtr]:
        """{input name: shape} with the batch size and reshape() applied (lists, with IE's
        DataPtr attributes: .shape, .precision, .layout)."""
        out = {}
        for name, dims in self._ir_inputs.items():
            dims = list(self._shapes.get(name, dims))
            if self._batch is not None:
                dims[0] = self._batch
            out[name] = DataPtr(name, dims, self._input_precision.get(name, "FP32"), self._input_layout.get(name))
        return out

    @property
    def outputs(self) -> dict[str, list]:
        """{output name: shape} as the IR gives them (the batch applied to dim 0); the
        exact shapes after a reshape are on the ExecutableNetwork."""
        out = {}
        for name, dims in self._ir_outputs.items():
            dims = list(dims)
            if self._batch is not None and dims and dims[0] == self._ir_batch:
                dims[0] = self._batch
            out[name] = DataPtr(name, dims)
        return out

    @property
    def batch_size(self) -> int:
        """The batch set, else that of the shapes reshape() gave (their first input's dim 0), else the IR's."""
        if self._batch is not None:
            return self._batch
        for name in self._ir_inputs:
            if name in self._shapes:
                return self._shapes[name][0]
        return self._ir_batch

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise Error("batch_size must be a positive integer, got {!r}", value)
        self._batch = int(value)

    def reshape(self, input_shapes: dict[str, Any]) -> None:
        """New input shapes {name: dims} (IE's IENetwork.reshape)."""
        if not isinstance(input_shapes, dict):
            raise Error("reshape takes a dict {{input name: shape}}, got {}", type(input_shapes).__name__)
        for name, dims in input_shapes.items():
            if name not in self._ir_inputs:
                raise Error("reshape: no input named {!r}; the network's inputs are {}", name,
                            ", ".join(map(repr, self._ir_inputs)))
            try:
                dims = [int(d) for d in dims]
            except (TypeError, ValueError):
                raise Error("reshape: the shape of input {!r} must be integers, got {!r}",
                            name, dims) from None
            if not dims or any(d < 1 for d in dims):
                raise Error("reshape: the shape of input {!r} must be positive integers, got {}",
                            name, dims)
            self._shapes[name] = dims
        self._batch = None

    def _load_args(self) -> dict:
        """batch / shapes / outputs of contract.load_request."""
        return {"batch": self._batch, "shapes": dict(self._shapes) or None, "outputs": tuple(self._extra)}

    def __repr__(self) -> str:
        return f"<IENetwork {self.name!r} inputs={self.inputs} outputs={list(self.outputs)}>"


class InferRequest(RequestIdioms):
    """A reusable inference request slot (IE's InferRequest; its callback, blobs and
    REQUEST_BUSY: ie_info.RequestIdioms)."""

    def __init__(self, exec_net: "ExecutableNetwork", index: int = -1):
        self._exec_net = exec_net
        self.index = index
        self._future: concurrent.futures.Future | None = None
        self.latency: float | None = None  # ms of the last completed request
        self.outputs: dict[str, np.ndarray] = {}
        self.perf: list[dict] = []  # the daemon's per-step rows of the last request (PERF_COUNT)
        self._init_idioms()

    @property
    def busy(self) -> bool:
        return self._future is not None and not self._future.done()

    def async_infer(self, inputs: dict | None = None, timeout: float | None = None) -> None:
        """Start the request (a thread of the network sends it; the inputs are copied
        before this returns, so their buffers may be refilled); wait() for it."""
        self._check_idle()
        inputs = self._inputs_or_blobs(inputs)
        self.outputs = {}
        self.latency = None
        self.perf = []
        self._future = None
        future = self._future = self._exec_net._submit(inputs, timeout)
        if self._callback is not None:
            future.add_done_callback(self._completed)

    def _completed(self, future) -> None:
        callback = self._callback
        error = future.exception()
        if error is None and self._future is future:
            self.outputs, self.perf, self.latency = future.result()
        if callback is not None:
            callback[0](StatusCode.OK if error is None else StatusCode.GENERAL_ERROR, callback[1])

    def wait(self, timeout: float | None = -1) -> int:
        """Block until the request completes (timeout -1 / None: up to the request's own
        timeout; else at most `timeout` s). StatusCode.OK when done,
        StatusCode.RESULT_NOT_READY when `timeout` ran out first; a failed request raises."""
        future = self._future
        if future is None:
            return StatusCode.OK if self.outputs else StatusCode.INFER_NOT_STARTED
        try:
            outputs, perf, latency = future.result(None if timeout is None or timeout < 0 else timeout)
        except TimeoutError:
            if not future.done():
                return StatusCode.RESULT_NOT_READY
            raise  # the request's own DaemonTimeout
        self._future = None
        self.outputs, self.perf, self.latency = outputs, perf, latency
        return StatusCode.OK

    def infer(self, inputs: dict | None = None, timeout: float | None = None) -> dict:
        """Synchronous request (sent from this thread); returns the outputs."""
        self._check_idle()
        inputs = self._inputs_or_blobs(inputs)
        self.outputs = {}
        self.latency = None
        self.perf = []
        t0 = time.perf_counter()
        self._future = None
        self.outputs, self.perf = self._exec_net.infer_counted(inputs, timeout)
        self.latency = (time.perf_counter() - t0) * 1e3
        return self.outputs

    def get_perf_counts(self) -> dict[str, dict]:
        """Per layer of the last request, as the Inference Engine's (see perf_counts).
        Needs load_network(..., config={"PERF_COUNT": "YES"})."""
        if not self._exec_net.perf_count:
            raise Error("get_perf_counts(): load the network with config={'PERF_COUNT': 'YES'} first")
        return perf_counts(self.perf)


DEVICE_KEYS = ("INFERENCE_PRECISION_HINT", "INFERENCE_NUM_THREADS")  # sent to the daemon, which checks them


def _device_config(config: dict | None) -> dict:
    """The keys of a load config the daemon takes (anything but PERF_COUNT), as they
    travel: a precision as a lower-case name (an openvino Type's name works too), a
    thread count as an integer."""
    out = {}
    for key, value in (config or {}).items():
        if key == "PERF_COUNT":
            continue
        if key not in DEVICE_KEYS:
            raise Error("load_network: unknown config key {!r}; the keys are PERF_COUNT, {}", key,
                        ", ".join(DEVICE_KEYS))
        if key == "INFERENCE_PRECISION_HINT":
            value = str(getattr(value, "get_type_name", lambda: value)()).strip().lower()
        elif isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        out[key] = value
    return out


def _perf_count(config: dict | None) -> bool:
    """The PERF_COUNT key of a load_network config ("YES"/"NO", as the Inference Engine)."""
    value = (config or {}).get("PERF_COUNT", "NO")
    if isinstance(value, bool):
        return value
    if str(value).upper() not in ("YES", "NO"):
        raise Error("config PERF_COUNT must be YES or NO, got {!r}", value)
    return str(value).upper() == "YES"


def _forked(loaded) -> bool:
    """Whether a (connection, handle) is of the process this one was forked from."""
    return loaded is not None and loaded[0].forked


class ExecutableNetwork:
    """A network loaded on a device daemon (IE's ExecutableNetwork). It is the
    LoadedNetwork its requests run on (request_path.py): link, loaded, forget,
    inputs, output_bytes, perf_count, bound, compute_us, poll_s."""

    def __init__(self, core: "IECore", network: IENetwork, link: Link, num_requests: int,
                 perf_count: bool = False, config: dict | None = None):
        self._core = core
        self.perf_count = perf_count  # each request brings back per-layer times (get_perf_counts)
        take_input_settings(self, network)  # input_info as at load: the NHWC inputs are transposed before sending
        self.link = link
        self.name = network.name
        self._network = network
        self._lock = threading.Lock()
        self._loaded: tuple[Connection, int] | None = None
        self._args = dict(network._load_args(), config=config or None)  # config: the device keys
        self.config: dict = {}  # what the network got (get_config / get_metric)
        self.inputs: dict[str, list] = {}
        self.outputs: dict[str, list] = {}
        self.warnings: list[str] = []
        self.cached = False
        self._box: dict = {}  # what the finalizer closes and unloads (it must not reference self)
        self._closed = False  # close() is final: a request after it is an error, not a new load
        self.output_bytes = 0
        self.compute_us: int | None = None  # the daemon's compute time of its last request (request_path)
        self.poll_s = 0.0  # how long its next request polls for the reply (request_path)
        self.loaded(Deadline.after(core.timeout))
        self.requests = [InferRequest(self, i) for i in range(max(1, int(num_requests)))]
        self._finalizer = None
        self._watch()
        reaper.start()

    @property
    def device(self) -> str:
        return self.link.device

    def get_config(self, key: str):
        """What the network got for a load config key (INFERENCE_PRECISION_HINT, INFERENCE_NUM_THREADS)."""
        if key not in self.config:
            raise Error("get_config: the {} daemon reports no {!r}; it reports {}", self.device, key,
                        ", ".join(sorted(self.config)) or "nothing")
        return self.config[key]

    get_metric = get_config  # (OPTIMAL_NUMBER_OF_INFER_REQUESTS: a metric in the Inference Engine)

    @property
    def input_info(self) -> dict[str, InputInfo]:
        """IE's (read-only) input_info: input_data.shape, precision, layout as loaded."""
        return {name: InputInfo(self, name, read_only=True) for name in self.inputs}

    @property
    def bound(self) -> BoundRequests | None:
        """Its bound requests on the current connection (request_path.py)."""
        return self._box.get("bound")

    @bound.setter
    def bound(self, value: BoundRequests | None) -> None:
        self._box["bound"] = value

    # ----------------------------------------------------------------- loading
    def _source_args(self, conn: Connection) -> dict:
        return self._core._ir_args(self._network, conn, self.link.device, **self._args)

    def loaded(self, deadline: Deadline) -> tuple[Connection, int]:
        """(connection, handle) on the current daemon, loading the network first when
        this daemon does not have it (a new or restarted daemon)."""
        link = self.link
        conn = link.connection()
        loaded = self._loaded
        if loaded is not None and loaded[0] is conn:
            return loaded
        if self._closed:
            raise Error("the network {} was closed (ExecutableNetwork.close()); load it again with "
                        "IECore.load_network", self.name)
        with self._lock:
            conn = link.connection()
            loaded = self._loaded
            if loaded is not None and loaded[0] is conn:
                return loaded
            pending = link.send(conn, contract.LOAD_NETWORK, self._source_args(conn))
            try:
                result, _ = link.wait(conn, pending, contract.LOAD_NETWORK, deadline)
                loaded = contract.check_load_result(result)
            except RemoteError as exc:
                raise remote_error(exc, link.device) from None
            except ProtocolError as exc:
                raise DaemonError(f"the {link.device} daemon broke the contract: {exc}") from None
            self.inputs, self.outputs = loaded.inputs, loaded.outputs
            self.output_bytes = sum(align(4 * int(np.prod(shape, dtype=np.int64)))
                                    for shape in self.outputs.values())
            self.warnings = loaded.warnings
            self.config = loaded.config
            self.cached = loaded.cached  # the daemon had it compiled already
            self.compute_us, self.poll_s = None, 0.0  # (a new daemon's: nothing known of it yet)
            self._loaded = (conn, loaded.handle)
            self._box["loaded"] = self._loaded
            if getattr(self, "_finalizer", None) is not None:  # loaded again, on a new connection (a restart)
                self._watch()
            return self._loaded

    def forget(self, conn: Connection, handle: int) -> None:
        with self._lock:
            if self._loaded == (conn, handle):
                self._loaded = None

    def _watch(self) -> None:
        """The finalizer that unloads the network when this object is collected (the
        unload runs on the reaper's thread, never inside the collection). Made again
        after a load on a new connection: at interpreter exit finalizers run newest
        first, and this one must run before that connection's client closes."""
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, reaper.later, ExecutableNetwork._unload_quietly, self._box)

    @staticmethod
    def _unload_quietly(box: dict) -> None:
        if _forked(box.get("loaded")):  # a forked child: the parent's network, connection and threads
            box.clear()
            return
        executor = box.pop("executor", None)
        if executor is not None:
            executor.shutdown(wait=False)
        bound = box.pop("bound", None)
        if bound is not None:
            bound.close()
        loaded = box.pop("loaded", None)
        if loaded is None:
            return
        conn, handle = loaded
        try:
            if conn.dead is None and not conn.client.closed:
                # (on this thread, not the client's I/O thread: at interpreter exit a connection made since a
                # daemon restart has no I/O thread running, and one started then never sends)
                conn.client.call(contract.UNLOAD, {"handle": handle}, timeout=2.0)
        except Exception:  # noqa: BLE001 - best effort (also runs at interpreter exit)
            pass

    def close(self) -> None:
        """Unload the network from the daemon (also done when this object is collected);
        requests after it are errors."""
        self._closed = True
        if _forked(self._loaded):  # (as _unload_quietly)
            self._loaded = None
            self._box.clear()
            return
        loaded = self._loaded
        self._loaded = None
        self._box.pop("loaded", None)
        executor = self._box.pop("executor", None)
        if executor is not None:
            executor.shutdown(wait=False)
        bound = self._box.pop("bound", None)
        if bound is not None:
            bound.close()
        if loaded is None:
            return
        conn, handle = loaded
        try:
            if conn.dead is None and not conn.client.closed:
                conn.client.call(contract.UNLOAD, {"handle": handle}, timeout=5.0)
        except MicrokernelError:
            pass

    def __enter__(self) -> "ExecutableNetwork":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ----------------------------------------------------------------- inference
    def _prepare(self, inputs: dict | None, copy: bool = False) -> dict:
        """{name: float32 array} of `inputs`; with `copy`, arrays of their own (an
        asynchronous request reads them after the caller may have refilled its buffers)."""
        if self._nhwc and isinstance(inputs, dict):
            inputs = to_ir_layout(inputs, self._nhwc)
        if isinstance(inputs, dict):
            for k, v in inputs.items():  # the common case, checked in one pass (a loop: no generator's calls)
                if type(v) is not np.ndarray or v.dtype != np.float32 or type(k) is not str:
                    break
            else:
                return {k: v.copy() for k, v in inputs.items()} if copy else dict(inputs)
        expected = ", ".join(f"'{n}' {s}" for n, s in self.inputs.items())
        if inputs is None:
            raise InferenceError(f"infer: no inputs given; the network's inputs are {expected}", "input")
        if not isinstance(inputs, dict):
            raise InferenceError(f"infer takes a dict {{input name: array}}, got {type(inputs).__name__}; "
                                 f"the network's inputs are {expected}", "input")
        out = {}
        for name, value in inputs.items():
            if not isinstance(name, str):
                raise InferenceError(f"infer: input names must be str, got {name!r}", "input")
            arr = np.asarray(value)
            if arr.dtype != np.float32:
                if arr.dtype.kind not in "fiub":
                    raise InferenceError(f"infer: input {name!r} has dtype {arr.dtype}; give numbers "
                                         f"(float32)", "input")
                arr = arr.astype(np.float32)  # (a new array)
            elif copy:
                arr = arr.copy()
            out[name] = arr
        return out

    def infer(self, inputs: dict | None = None, timeout: float | None = None) -> dict[str, np.ndarray]:
        """Run one request: {output name: array}. Thread-safe."""
        return self.infer_counted(inputs, timeout)[0]

    def infer_counted(self, inputs: dict | None = None, timeout: float | None = None) -> tuple[dict, list]:
        """infer() and the daemon's perf rows of that request ([] unless PERF_COUNT)."""
        prepared = self._prepare(inputs)
        return request_path.run(self, prepared, request_path.deadline_of(self.link, timeout))

    def _submit(self, inputs: dict | None, timeout: float | None) -> concurrent.futures.Future:
        """Run a request on a thread of this network's (as many as it has request
        slots, at least 4): a future of (outputs, perf rows, latency ms). The inputs are
        copied now; the timeout counts from when a thread sends it (a request queued
        behind others has not been sent)."""
        prepared = self._prepare(inputs, copy=True)
        executor = self._box.get("executor")
        if executor is None:
            with self._lock:
                executor = self._box.get("executor")
                if executor is None:
                    executor = self._box["executor"] = concurrent.futures.ThreadPoolExecutor(
                        max(4, len(self.requests)), thread_name_prefix=f"mo-core-{self.name}"[:40])
        t0 = time.perf_counter()

        def job():
            outputs, perf = request_path.run(self, prepared, request_path.deadline_of(self.link, timeout))
            return outputs, perf, (time.perf_counter() - t0) * 1e3
        return executor.submit(job)

    def get_idle_request_id(self) -> int:
        """The index of a request slot not running now, -1 if all are (IE's)."""
        return next((i for i, req in enumerate(self.requests) if not req.busy), -1)

    def start_async(self, inputs: dict | None = None, request_id: int | None = None,
                    timeout: float | None = None) -> InferRequest:
        """Start a request; returns its InferRequest (`wait()`, then `.outputs`).
        IE's order `start_async(request_id, inputs)` works too."""
        if isinstance(inputs, int) and not isinstance(inputs, bool):
            inputs, request_id = request_id, inputs
        req = self.requests[request_index(self, request_id)] if request_id is not None else InferRequest(self)
        req.async_infer(inputs, timeout)
        return req

    def __repr__(self) -> str:
        return f"<ExecutableNetwork {self.name!r} on {self.device}>"


# --------------------------------------------------------------------------- core

class IECore:
    """Entry point (IE's IECore): reads networks, loads them on device daemons."""

    def __init__(self, policy: str = "auto", *, timeout: float = 120.0, startup_timeout: float = 60.0,
                 endpoint: str | None = None, key_file: str | None = None, transfer: str = "auto",
                 shared_memory: bool | None = None):
        if policy not in POLICIES:
            raise Error("IECore policy must be one of {}, got {!r}", ", ".join(POLICIES), policy)
        if transfer not in ("auto", "paths", "content"):
            raise Error("IECore transfer must be 'auto', 'paths' or 'content', got {!r}", transfer)
        if not timeout or timeout <= 0:
            raise Error("IECore timeout must be > 0 s, got {!r}", timeout)
        if endpoint and not key_file:  # this user's daemon there: the key its start made (its record names it)
            key_file = _daemon.recorded_key_file(endpoint)
        if endpoint:
            _daemon.check_daemon_endpoint(endpoint, bool(key_file))
        self.policy = policy
        self.timeout = float(timeout)
        self.startup_timeout = float(startup_timeout)
        self.endpoint = endpoint
        self.key_file = os.path.abspath(key_file) if key_file else None
        self.transfer = transfer
        if shared_memory is None:
            shared_memory = os.environ.get("MO_CORE_SHM", "1") != "0" and hasattr(os, "memfd_create")
        self.shared_memory = bool(shared_memory)
        self._settings = LinkSettings(policy, self.timeout, self.startup_timeout, endpoint, self.key_file,
                                      self.shared_memory)
        self._links: dict[str, Link] = {}
        self._links_lock = threading.Lock()
        self._exec_nets: weakref.WeakSet = weakref.WeakSet()  # close() unloads those still alive
        self._extensions: dict[str, list[str]] = {}
        self._configs: dict[str, dict] = {}  # set_config: a device's default load config

    @property
    def available_devices(self) -> list[str]:
        return sorted(_daemon.DEVICES)

    def _link(self, device: str) -> Link:
        device = _daemon.normalize_device(device)
        with self._links_lock:
            link = self._links.get(device)
            if link is None:
                link = self._links[device] = Link(self._settings, device)
            return link

    def read_network(self, model: str, weights: str | None = None) -> IENetwork:
        return IENetwork(model, weights)

    def add_extension(self, extension_path: str, device_name: str = "CPU") -> list[str]:
        """Custom kernels (a Python file of CPU kernel classes) for every later
        load_network on `device_name`. The daemon imports the file now, so a broken
        file is reported here. Returns the layer types it provides."""
        link = self._link(device_name)
        path = os.fspath(extension_path)
        if not self.endpoint or is_loopback(self.endpoint) or self.endpoint.startswith("ipc://"):
            path = os.path.abspath(path)  # the daemon runs in another directory
            if not os.path.isfile(path):
                raise InferenceError(f"cannot find the custom kernel file {path}", "kernel")
        result, _ = link.call(contract.ADD_EXTENSION, {"path": path, "check_only": True})
        paths = self._extensions.setdefault(link.device, [])
        if path not in paths:
            paths.append(path)
        return list(result.get("types", []))

    def set_config(self, config: dict, device_name: str = "CPU") -> None:
        """Default load config of a device (IE's set_config): every later load_network on
        it starts from these keys (its own config overrides them)."""
        device = _daemon.normalize_device(device_name)
        _perf_count(config)
        _device_config(config)
        self._configs.setdefault(device, {}).update(config)

    def load_network(self, network: IENetwork, device_name: str = "CPU", config: dict | None = None,
                     num_requests: int = 1):
        """An ExecutableNetwork on the device's daemon; for "HETERO:DEV1,DEV2" a
        HeteroExecutableNetwork (client/hetero): each layer on the first
        device that supports it (network.affinity overrides per layer), one
        sub-network per run of layers on one device, each with its device's keys of
        `config` (set_config's defaults first)."""
        if not isinstance(network, IENetwork):
            raise Error("load_network takes an IENetwork (from IECore.read_network), got {}",
                        type(network).__name__)
        if str(device_name).strip().upper().startswith("HETERO"):
            from .hetero.network import HeteroExecutableNetwork, hetero_devices
            # (each part's load merges its own device's defaults; PERF_COUNT set on any of them counts)
            defaults = [self._configs.get(d, {}) for d in hetero_devices(device_name)]
            perf_count = _perf_count(config) if "PERF_COUNT" in (config or {}) else any(map(_perf_count, defaults))
            return HeteroExecutableNetwork(self, network, device_name, num_requests, perf_count=perf_count,
                                           config=config)
        link = self._link(device_name)
        merged = dict(self._configs.get(link.device, {}), **(config or {}))
        exec_net = ExecutableNetwork(self, network, link, num_requests, perf_count=_perf_count(merged),
                                     config=_device_config(merged))
        self._exec_nets.add(exec_net)
        return exec_net

    def query_network(self, network: IENetwork, device_name: str = "CPU") -> dict[str, str]:
        """{layer name: device} for the layers the device runs (IE's query_network;
        the extensions added for the device count). For HETERO: the affinity."""
        if str(device_name).strip().upper().startswith("HETERO"):
            from .hetero.network import hetero_affinity
            return hetero_affinity(self, network, device_name)
        link = self._link(device_name)
        result, _ = link.call(contract.QUERY_NETWORK, self._ir_args(network, link.connection(), link.device))
        try:
            return contract.check_query_result(result)
        except ProtocolError as exc:
            raise DaemonError(f"the {link.device} daemon broke the contract: {exc}") from None

    def _ir_args(self, network: IENetwork, conn: Connection, device: str, **load) -> dict:
        """contract.load_request for `network`: its paths (a local daemon) or its
        content, the device's extension files, and `load` (batch, shapes, outputs)."""
        kernels = self._extensions.get(device, [])
        if conn.local:  # the daemon unloads what this process loaded once it ends (a killed client too)
            load = dict(load, owner=os.getpid())
        if self.transfer == "paths" or (self.transfer == "auto" and conn.local):
            return contract.load_request(xml=network.model, bin=network.weights, kernels=kernels, **load)
        try:
            with open(network.model, "rb") as f:
                xml_text = f.read()
            with open(network.weights, "rb") as f:
                bin_data = np.frombuffer(f.read(), np.uint8)
        except OSError as exc:
            raise Error("cannot read the IR to send it to the daemon: {}", exc) from None
        return contract.load_request(xml_text=xml_text, bin_data=bin_data, kernels=kernels, **load)

    def get_versions(self, device_name: str = "CPU") -> dict:
        link = self._link(device_name)
        info, _ = link.call(contract.STATUS)
        return {link.device: {"version": info.get("version"), "pid": info.get("pid")}}

    def daemon_pid(self, device_name: str = "CPU") -> int | None:
        """Pid of the daemon this core talks to for `device_name` (connecting if needed)."""
        return self._link(device_name).connection().pid

    def close(self) -> None:
        """Unload the networks it loaded that are still alive, then close the
        connections (running daemons keep running)."""
        for exec_net in list(self._exec_nets):
            exec_net.close()
        with self._links_lock:
            links = list(self._links.values())
        for link in links:
            link.close()

    def __enter__(self) -> "IECore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
