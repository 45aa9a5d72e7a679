"""HeteroExecutableNetwork: one network over several device daemons
(`ie.load_network(net, "HETERO:GPU,CPU")`).

Loading: each device's daemon answers query_network (with the extensions added
for it); split.assign_affinity puts every layer on the first device of the list
that supports it, or where `net.affinity[layer]` says; split.split_network cuts
the network into sub-networks, one per run of layers on one device. Each part is
written as an IR into a private temporary directory of the runtime directory and
loaded on its daemon like any network, with the tensors later parts read as
extra outputs (load_network's `outputs`).

Inference: the parts run in order; a part's outputs (on a local daemon, views of
its shared-memory slot) are the next parts' inputs (copied into their slots), so
tensors move between the daemons through shared memory, not the socket. The
result has the original network's output names. `split_lines()` is what
`mo-core infer` shows.

This module uses only IECore's public methods (read_network, load_network,
query_network), so the client does not depend on it at import time.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import weakref

import numpy as np

from core.errors import Error
from core.microkernel import runtime_dir
from ir import write_ir

from ..ie_info import InputInfo, RequestIdioms, StatusCode, take_input_settings, to_ir_layout
from ..perf_counts import perf_counts
from ..request_ids import request_index
from .split import HeteroError, assign_affinity, parse_hetero, run_split, split_network


def hetero_devices(device_name: str) -> list[str]:
    try:
        return parse_hetero(str(device_name).strip())
    except HeteroError as exc:
        raise Error("{}", exc.message) from None


def _affinity(core, network, devices: list[str]) -> dict[str, str]:
    supported = {device: set(core.query_network(network, device)) for device in devices}
    try:
        return assign_affinity(network._ir, devices, supported, network.affinity)
    except HeteroError as exc:
        raise Error("{}", exc.message) from None


def hetero_affinity(core, network, device_name: str) -> dict[str, str]:
    """{layer name: device} HETERO would use (IECore.query_network for HETERO)."""
    return _affinity(core, network, hetero_devices(device_name))


class HeteroRequest(RequestIdioms):
    """An asynchronous request of a HeteroExecutableNetwork (a thread runs the parts)."""

    def __init__(self, exec_net: "HeteroExecutableNetwork"):
        self._exec_net = exec_net
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.outputs: dict = {}
        self.latency: float | None = None
        self.perf: list[dict] = []  # the parts' perf rows of the last request (PERF_COUNT)
        self._running = False  # (not the thread's life: a callback that restarts the request runs on it)
        self._init_idioms()

    @property
    def busy(self) -> bool:
        return self._running

    def async_infer(self, inputs: dict | None = None, timeout: float | None = None) -> None:
        """Start the request on a thread (the inputs copied before this returns)."""
        self._check_idle()
        inputs = self._inputs_or_blobs(inputs)
        if isinstance(inputs, dict):
            inputs = {name: np.array(value, copy=True) for name, value in inputs.items()}
        self.outputs, self.latency, self._error, self.perf = {}, None, None, []

        def run():
            t0 = time.perf_counter()
            try:
                self.outputs = self._exec_net.infer(inputs, timeout, self.perf)
                self.latency = (time.perf_counter() - t0) * 1e3
            except BaseException as exc:  # noqa: BLE001 - handed to wait()
                self._error = exc
            self._running = False
            if callback is not None:
                callback[0](StatusCode.OK if self._error is None else StatusCode.GENERAL_ERROR, callback[1])
        callback = self._callback
        self._running = True
        self._thread = threading.Thread(target=run, name="mo-core-hetero-request", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = -1) -> int:
        if self._thread is None:
            return StatusCode.INFER_NOT_STARTED
        self._thread.join(None if timeout is None or timeout < 0 else timeout)
        if self._thread.is_alive():
            return StatusCode.RESULT_NOT_READY
        if self._error is not None:
            raise self._error
        return StatusCode.OK

    def infer(self, inputs: dict | None = None, timeout: float | None = None) -> dict:
        self._check_idle()
        inputs = self._inputs_or_blobs(inputs)
        t0 = time.perf_counter()
        self.perf = []
        self.outputs = self._exec_net.infer(inputs, timeout, self.perf)
        self.latency = (time.perf_counter() - t0) * 1e3
        return self.outputs

    def get_perf_counts(self) -> dict[str, dict]:
        """The parts' layers of the last request in order, exec_type "DEVICE backend"
        (perf_counts.py). Needs load_network(..., config={"PERF_COUNT": "YES"})."""
        if not self._exec_net.perf_count:
            raise Error("get_perf_counts(): load the network with config={'PERF_COUNT': 'YES'} first")
        return perf_counts(self.perf)


class HeteroExecutableNetwork:
    """A network split over device daemons; the ExecutableNetwork interface
    (infer, start_async, requests, inputs, outputs, close)."""

    def __init__(self, core, network, device_name: str, num_requests: int = 1, perf_count: bool = False,
                 config: dict | None = None):
        devices = hetero_devices(device_name)
        self.perf_count = perf_count
        self.device = "HETERO:" + ",".join(devices)
        self.name = network.name
        if network._shapes:
            raise Error("HETERO runs a network at its IR shapes or another batch (batch_size), not reshaped "
                        "inputs: the shapes of the tensors between its parts come from the IR")
        self.affinity = _affinity(core, network, devices)
        try:
            self.split = split_network(network._ir, self.affinity, network._extra)
        except HeteroError as exc:
            raise Error("{}", exc.message) from None
        self._dir = tempfile.mkdtemp(prefix="hetero-", dir=runtime_dir())
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._dir, True)
        self.parts = []
        try:
            for i, part in enumerate(self.split.parts):
                xml = os.path.join(self._dir, f"part{i + 1}.xml")
                write_ir(part.network, xml)
                sub = core.read_network(xml)
                if part.outputs:
                    sub.add_outputs(part.outputs)
                if network._batch is not None:
                    sub.reshape(self._part_shapes(network, part))
                # the CPU's keys (precision, threads) go to its parts; the GPU daemon takes none
                keys = {k: v for k, v in (config or {}).items()
                        if k != "PERF_COUNT" and part.device.split(".")[0] == "CPU"}
                self.parts.append(core.load_network(sub, part.device, num_requests=1,
                                                    config=dict(keys, **({"PERF_COUNT": "YES"} if perf_count else {}))))
        except BaseException:
            self.close()
            raise
        self.inputs = network.inputs
        self.outputs = {key: self.parts[p].outputs[k] for key, (p, k) in self.split.results.items()}
        take_input_settings(self, network)
        self.warnings = [w for part in self.parts for w in part.warnings]
        self.requests = [HeteroRequest(self) for _ in range(max(1, int(num_requests)))]

    def _part_shapes(self, network, part) -> dict:
        """The exact shapes of a part's inputs at the network's batch: a network input's with the batch first,
        a tensor of an earlier part as that part computes it (a PriorBox's dim 0 is 1 at any batch; a Permute's
        batch may sit on another axis)."""
        shapes = {}
        for name, source in part.inputs.items():
            if source[0] == "input":
                dims = list(network._ir.layer_by_name(source[1]).outputs[0].dims)
                if dims:  # (a scalar input has no batch)
                    shapes[name] = [network._batch] + dims[1:]
            else:
                shapes[name] = list(self.parts[source[1]].outputs[source[2]])
        return shapes

    @property
    def input_info(self) -> dict:
        return {name: InputInfo(self, name, read_only=True) for name in self.inputs}

    @property
    def config(self) -> dict:
        """Each part's load config, by its device (the ExecutableNetwork's `config` of each)."""
        return {f"{i + 1}:{part.device}": dict(part.config) for i, part in enumerate(self.parts)}

    def get_config(self, key: str):
        """A key every part got the same value of (get_config of an ExecutableNetwork)."""
        values = {str(part.get_config(key)) for part in self.parts if key in part.config}
        if len(values) != 1:
            raise Error("get_config: the HETERO network's parts report {} for {!r}", ", ".join(
                f"{part.device} {part.config.get(key, 'nothing')}" for part in self.parts), key)
        return next(part.get_config(key) for part in self.parts if key in part.config)

    def get_metric(self, key: str):
        """OPTIMAL_NUMBER_OF_INFER_REQUESTS: the most any part wants (as OpenVINO's HETERO);
        other keys as get_config."""
        if key == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            return max(int(part.get_metric(key)) for part in self.parts)
        return self.get_config(key)

    def split_lines(self) -> list[str]:
        """How the network is split: one line per part (device, layers)."""
        return self.split.describe()

    def infer(self, inputs: dict | None = None, timeout: float | None = None,
              perf: list | None = None) -> dict[str, np.ndarray]:
        """{output name: array}; with `perf` (a list, PERF_COUNT) each part's perf rows
        are appended, the backend prefixed by the part's device."""
        self._check_open()
        if not isinstance(inputs, dict):
            raise Error("infer takes a dict {{input name: array}}; the network's inputs are {}",
                        ", ".join(map(repr, self.inputs)))
        inputs = to_ir_layout(inputs, self._nhwc)
        unknown, missing = set(inputs) - set(self.inputs), set(self.inputs) - set(inputs)
        if unknown or missing:
            raise Error("infer: {}; the network's inputs are {}",
                        "no input named " + ", ".join(sorted(map(repr, unknown))) if unknown else
                        "missing " + ", ".join(sorted(map(repr, missing))), ", ".join(map(repr, self.inputs)))
        def run_part(i, part, feed):
            if perf is None:
                return self.parts[i].infer(feed, timeout)
            outputs, rows = self.parts[i].infer_counted(feed, timeout)
            perf.extend(dict(row, backend=f"{self.parts[i].device} {row['backend']}") for row in rows)
            return outputs
        return run_split(self.split, inputs, run_part)

    def get_idle_request_id(self) -> int:
        return next((i for i, req in enumerate(self.requests) if not req.busy), -1)

    def start_async(self, inputs: dict | None = None, request_id: int | None = None,
                    timeout: float | None = None) -> HeteroRequest:
        if isinstance(inputs, int) and not isinstance(inputs, bool):
            inputs, request_id = request_id, inputs
        self._check_open()
        req = self.requests[request_index(self, request_id)] if request_id is not None else HeteroRequest(self)
        req.async_infer(inputs, timeout)
        return req

    def _check_open(self) -> None:
        if not self.parts:
            raise Error("the HETERO network {} was closed; load it again", self.name)

    def close(self) -> None:
        for part in getattr(self, "parts", []):
            part.close()
        self.parts = []
        self._finalizer()

    def __enter__(self) -> "HeteroExecutableNetwork":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<HeteroExecutableNetwork {self.name!r} on {self.device}: {len(self.split.parts)} parts>"
