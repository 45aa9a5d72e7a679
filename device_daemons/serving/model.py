"""One model version served from a device daemon: its inputs and outputs as the
protocol names them, networks loaded per batch size, requests checked against its
metadata, and (optionally) the dynamic batcher in front of it.

Only the public client API of the daemons is used (IECore, read_network,
batch_size, load_network, ExecutableNetwork.infer)."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from core.errors import Error

from .batcher import DynamicBatcher
from .config import ModelConfig
from .errors import ServingError, bad_request, unavailable
from .tensors import DATATYPES

log = logging.getLogger("mo_core.serve")
PLATFORM = "mo-core_ir"
EXACT_INT = 1 << 24  # integers up to this magnitude are exact in FP32


@dataclass(frozen=True)
class TensorSpec:
    name: str  # the protocol's
    ir_name: str  # the daemon's
    datatype: str
    shape: tuple  # as the metadata gives it: -1 for the batch dimension of a batching model

    @property
    def dtype(self) -> np.dtype:
        return DATATYPES[self.datatype]

    def describe(self) -> str:
        return f"'{self.name}' {self.datatype} {list(self.shape)}"


def _specs(ir: dict, configured: tuple, batching: bool, what: str, where: str) -> tuple:
    """TensorSpecs of the network's inputs or outputs {ir name: shape}, renamed and
    retyped as the config says."""
    by_ir = {c.ir_name: c for c in configured}
    unknown = [c.ir_name for c in configured if c.ir_name not in ir]
    if unknown:
        raise Error("{}: {} {} not in the model (its {}: {})", where, what[:-1] if len(unknown) == 1 else what,
                    ", ".join(map(repr, unknown)), what, ", ".join(map(repr, ir)))
    specs = []
    for ir_name, shape in ir.items():
        c = by_ir.get(ir_name)
        shape = tuple(int(d) for d in shape)
        if batching:
            shape = (-1,) + shape[1:]
        specs.append(TensorSpec(c.name if c else ir_name, ir_name, (c.datatype if c else None) or "FP32", shape))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise Error("{}: two {} have the same name ({})", where, what, names)
    return tuple(specs)


class ServedModel:
    def __init__(self, ie, name: str, version: int, xml: str, bin_: str, config: ModelConfig):
        self.name = name
        self.version = version
        self.config = config
        self.max_batch = config.max_batch_size
        self.networks: dict[int, object] = {}  # loaded batch size (0: the IR's own) -> ExecutableNetwork
        where = config.source or f"model {name}"
        try:
            for batch in config.loaded_batches():
                net = ie.read_network(xml, bin_)
                if batch:
                    net.batch_size = batch
                t0 = time.monotonic()
                self.networks[batch] = ie.load_network(net, config.device, config=dict(config.plugin_config) or None)
                log.info("model %s version %s: loaded on %s%s in %.2f s", name, version, config.device,
                         f" at batch {batch}" if batch else "", time.monotonic() - t0)
            first = self.networks[min(self.networks)]
            self.inputs = _specs(first.inputs, config.inputs, self.max_batch > 0, "inputs", where)
            self.outputs = _specs(first.outputs, config.outputs, self.max_batch > 0, "outputs", where)
            if self.max_batch:
                self._check_batching(where)
        except BaseException:
            self.close()
            raise
        self._inputs_by_name = {s.name: s for s in self.inputs}
        self._outputs_by_name = {s.name: s for s in self.outputs}
        self._batches = sorted(self.networks)
        self.batcher = None
        if config.dynamic_batching:
            self.batcher = DynamicBatcher(self.execute, self.max_batch, config.max_queue_delay_us,
                                          config.instance_count, name)

    def _check_batching(self, where: str) -> None:
        for batch, net in self.networks.items():
            for name, shape in list(net.inputs.items()) + list(net.outputs.items()):
                if not shape or shape[0] != batch:
                    raise Error("{}: 'max_batch_size' needs every input and output to have the batch as its "
                                "first dimension, but '{}' is {} at batch {}; set max_batch_size 0",
                                where, name, list(shape), batch)

    # ----------------------------------------------------------------- metadata
    def metadata(self) -> dict:
        tensor = lambda s: {"name": s.name, "datatype": s.datatype, "shape": list(s.shape)}  # noqa: E731
        return {"name": self.name, "versions": [str(self.version)], "platform": PLATFORM,
                "inputs": [tensor(s) for s in self.inputs], "outputs": [tensor(s) for s in self.outputs]}

    def model_config(self) -> dict:
        """The model's configuration in the shape of Triton's (the fields that apply)."""
        tensor = lambda s: {"name": s.name, "data_type": "TYPE_" + s.datatype,  # noqa: E731
                            "dims": list(s.shape[1:] if self.max_batch else s.shape)}
        config = {"name": self.name, "platform": PLATFORM, "backend": "mo-core",
                  "max_batch_size": self.max_batch, "input": [tensor(s) for s in self.inputs],
                  "output": [tensor(s) for s in self.outputs],
                  "instance_group": [{"count": self.config.instance_count, "kind": "KIND_" + (
                      "GPU" if self.config.device.upper().startswith("GPU") else "CPU")}],
                  "parameters": {"device": {"string_value": self.config.device}}}
        if self.config.dynamic_batching:
            config["dynamic_batching"] = {"max_queue_delay_microseconds": self.config.max_queue_delay_us,
                                          "preferred_batch_size": list(self._batches)}
        return config

    # ----------------------------------------------------------------- inference
    def check_inputs(self, inputs: dict) -> tuple[dict, int]:
        """The request's {name: array} checked against the metadata: ({IR name:
        float32 array}, batch)."""
        missing = [s.describe() for s in self.inputs if s.name not in inputs]
        unknown = [n for n in inputs if n not in self._inputs_by_name]
        if unknown or missing:
            expected = ", ".join(s.describe() for s in self.inputs)
            raise bad_request(f"model '{self.name}': "
                              + (f"unknown input {', '.join(map(repr, unknown))}; " if unknown else "")
                              + (f"missing input {', '.join(missing)}; " if missing else "")
                              + f"its inputs are {expected}")
        batch = None
        ir_inputs = {}
        for name, arr in inputs.items():
            spec = self._inputs_by_name[name]
            if arr.dtype != spec.dtype:
                raise bad_request(f"model '{self.name}': input '{name}' is {spec.datatype}, the request gave "
                                  f"{_datatype(arr.dtype)}")
            if not _shape_fits(arr.shape, spec.shape, self.max_batch):
                limit = f" (batch 1 to {self.max_batch})" if self.max_batch else ""
                raise bad_request(f"model '{self.name}': input '{name}' must have shape {list(spec.shape)}"
                                  f"{limit}, the request gave {list(arr.shape)}")
            n = arr.shape[0] if self.max_batch else 0
            if batch is not None and n != batch:
                raise bad_request(f"model '{self.name}': the inputs have different batch sizes")
            batch = n
            ir_inputs[spec.ir_name] = arr if arr.dtype == np.float32 else self._to_float32(name, spec, arr)
        return ir_inputs, batch

    def _to_float32(self, name: str, spec, arr: np.ndarray) -> np.ndarray:
        """An input of another datatype as the FP32 the daemons compute in: integers
        exactly (refused past 2**24, where FP32 has no exact value for every one),
        FP64 rounded to the nearest FP32 (refused past FP32's range)."""
        if arr.dtype.kind in "iu" and arr.size and arr.dtype.itemsize >= 4:
            if int(arr.max()) > EXACT_INT or int(arr.min()) < -EXACT_INT:
                raise bad_request(f"model '{self.name}': input '{name}' ({spec.datatype}) holds values past "
                                  f"+-{EXACT_INT}, which the FP32 the model computes in cannot hold exactly")
        try:
            with np.errstate(over="raise"):
                return arr.astype(np.float32)
        except FloatingPointError:
            raise bad_request(f"model '{self.name}': input '{name}' ({spec.datatype}) holds values past FP32's "
                              f"range (+-3.4e38), which the model computes in") from None

    def infer(self, inputs: dict, outputs: list | None = None, timeout: float | None = None) -> tuple[dict, dict]:
        """Run a request: ({output name: array}, timings in ns: queue_ns,
        compute_input_ns, compute_infer_ns, compute_output_ns, batch_size, executed)."""
        t0 = time.perf_counter_ns()
        wanted = self._wanted(outputs)
        ir_inputs, n = self.check_inputs(inputs)
        checked = time.perf_counter_ns()
        if self.batcher is not None:
            ir_outputs, timings = self.batcher.submit(ir_inputs, n, timeout)
        else:
            ir_outputs, timings = self.execute(ir_inputs, n)
            timings = dict(timings, queue_ns=0, executed=1)
        t1 = time.perf_counter_ns()
        result = {}
        for spec in wanted:
            value = ir_outputs[spec.ir_name]
            result[spec.name] = value if value.dtype == spec.dtype else self._cast(spec, value)
        timings["request_batch"] = max(n, 1)
        timings["compute_input_ns"] += checked - t0
        timings["compute_output_ns"] += time.perf_counter_ns() - t1
        return result, timings

    def _wanted(self, outputs: list | None) -> list:
        if not outputs:
            return list(self.outputs)
        unknown = [n for n in outputs if n not in self._outputs_by_name]
        if unknown:
            raise bad_request(f"model '{self.name}': no output {', '.join(map(repr, unknown))}; its outputs are "
                              + ", ".join(s.describe() for s in self.outputs))
        return [self._outputs_by_name[n] for n in outputs]

    def _cast(self, spec, value: np.ndarray) -> np.ndarray:
        """An FP32 output as its declared datatype: an integer one rounded to the nearest
        and saturated at the datatype's range (never wrapped); NaN has no integer value,
        so such an output fails the request (declare it FP32 or FP16 to see it)."""
        dtype = spec.dtype
        if dtype.kind == "b":
            return value != 0
        if dtype.kind in "iu":
            if np.isnan(value).any():
                raise ServingError(f"model '{self.name}': output '{spec.name}' has NaN values, which "
                                   f"{spec.datatype} cannot hold; declare it FP32 in config.json to receive them",
                                   500, "BACKEND")
            info = np.iinfo(dtype)
            # (clipped in float64, where INT32's bounds are exact; INT64's and UINT64's upper one is not:
            # the float64 below it)
            high = float(info.max) if dtype.itemsize < 8 else np.nextafter(float(info.max), 0.0)
            return np.clip(np.rint(value.astype(np.float64)), info.min, high).astype(dtype)
        return value.astype(dtype)

    def execute(self, ir_inputs: dict, n: int) -> tuple[dict, dict]:
        """One daemon request of batch n (0: a model without a batch dimension) on the
        smallest loaded network that holds it, padded with zeros, outputs cut back to n."""
        t0 = time.perf_counter_ns()
        batch = next(b for b in self._batches if b >= n)
        if batch > n:
            ir_inputs = {name: np.concatenate([a, np.zeros((batch - n,) + a.shape[1:], np.float32)])
                         for name, a in ir_inputs.items()}
        t1 = time.perf_counter_ns()
        net = self.networks.get(batch)
        if net is None:
            raise self._unloaded()
        try:
            outputs = net.infer(ir_inputs)
        except Error as exc:  # the daemon's answer (bad input it caught, a daemon that died, a timeout)
            if not self.networks:  # unloaded while this request was on its way: its networks are closed
                raise self._unloaded() from None
            raise ServingError(f"model '{self.name}': {exc}", 500, "BACKEND") from None
        t2 = time.perf_counter_ns()
        if batch > n:
            outputs = {name: value[:n] for name, value in outputs.items()}
        return outputs, {"compute_input_ns": t1 - t0, "compute_infer_ns": t2 - t1,
                         "compute_output_ns": time.perf_counter_ns() - t2, "batch_size": max(n, 1)}

    def _unloaded(self) -> ServingError:
        return unavailable(f"model '{self.name}' was unloaded while the request ran; send it again")

    def close(self) -> None:
        """Stop the batcher (queued requests finish) and unload the networks."""
        batcher = getattr(self, "batcher", None)
        if batcher is not None:
            batcher.close()
        networks, self.networks = self.networks, {}  # (first: a request failing on a closed one sees it unloaded)
        for net in networks.values():
            net.close()


def _datatype(dtype: np.dtype) -> str:
    return next((k for k, v in DATATYPES.items() if v == dtype), str(dtype))


def _shape_fits(shape: tuple, spec: tuple, max_batch: int) -> bool:
    if len(shape) != len(spec):
        return False
    if max_batch:
        return 1 <= shape[0] <= max_batch and tuple(shape[1:]) == tuple(spec[1:])
    return tuple(shape) == tuple(spec)
