"""The GPU daemon: runs IR networks on an OpenCL device for any number of clients.

    python -m device_daemons.gpu --endpoint EP [--device GPU|GPU.N] [--parent-pid PID|0]
                                 [--key-file F] [--threads N] [--no-record]

The verbs, caching, handles, shared memory and errors are every daemon's
(device_daemons/service/), with the CPU daemon's contract. The GPU's own
parts: extensions are GPU custom layer .xml files (custom.py); a compiled network
is one GpuPlan (its weights on the device once) whose infer() is thread-safe: each
in-flight request has its own command queue and buffers, so a pool needs one plan,
not one per thread; query_network is query.py's. The device is opened before the
endpoint is bound: no OpenCL device is an `[ ERROR ]` at start, not a daemon that
fails every request. Every local request computes on its own local-carrier
connection's thread, the others on the pool (service/device_daemon.py).

A long or endless kernel: the request threads wait for the device without holding
the interpreter lock (request.py), and the I/O thread never computes, so `hello`,
`status` and other requests are answered meanwhile; a request past its deadline
(MO_CORE_GPU_TIMEOUT) fails with kind "device_timeout", and since nothing stops a
running OpenCL kernel in this process, the daemon - the part that runs kernels -
then exits: the client that asked gets its error first, and any client's next
request starts a fresh daemon (policy "auto"), which loads its networks again.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import threading
import time

from ..service import DeviceDaemon, serve_daemon
from .custom import CustomLayers, load_custom_layers
from .device import DeviceError, open_device, parse_device_name
from .plan import GpuPlan
from .query import query_network
from .request import DeviceTimeout

log = logging.getLogger("mo_core.daemon")
EXIT_GRACE_S = 1.0  # the timed-out request's reply goes out first


class GpuPool:
    """A compiled network of the GPU daemon: one GpuPlan shared by every request
    (the interface of cpu/plan_pool.PlanPool)."""

    def __init__(self, key: tuple, network, custom: CustomLayers | None, shapes: dict | None, device,
                 source: str, extra_outputs=None):
        self.plan = GpuPlan(network, device, custom_layers=custom, extra_outputs=extra_outputs)
        if shapes:
            self.plan.reshape(shapes)
        self.key = key
        self.network = network
        self.load_args: tuple = ()
        self.source = source
        self.name = network.name
        self.custom = bool(custom) and any(step.layer.type in custom for step in self.plan.steps)
        self.inputs = {n: {"shape": list(s), "precision": "FP32"} for n, s in self.plan.input_shapes().items()}
        self.outputs = {n: {"shape": list(s), "precision": "FP32"} for n, s in self.plan.output_shapes().items()}
        self.warnings = list(self.plan.warnings)
        self.refs = 0
        self.last_used = time.monotonic()
        self._busy = 0
        self._most = 0
        self._lock = threading.Lock()

    @property
    def instances(self) -> int:
        """Requests (queue + buffers) the plan made: the most ever in flight at once."""
        return max(1, self._most)

    @contextlib.contextmanager
    def acquire(self):
        plan = self.take()
        try:
            yield plan
        finally:
            self.give(plan)

    def take(self):
        """The plan for one request (as the CPU's PlanPool.take); give() it back."""
        with self._lock:
            self._busy += 1
            self._most = max(self._most, self._busy)
        return self.plan

    def give(self, plan) -> None:
        with self._lock:
            self._busy -= 1


class GpuDaemon(DeviceDaemon):
    """State and verbs of the GPU daemon (independent of the socket: testable)."""

    EXTENSION = "GPU custom layer file"

    def __init__(self, device_name: str = "GPU", threads: int = 2, endpoint: str = "") -> None:
        super().__init__(threads, endpoint)
        self.DEVICE = device_name
        self.device = open_device(device_name)

    def load_extension(self, path: str) -> dict:
        return load_custom_layers(path)

    @staticmethod
    def _custom(extensions: list) -> CustomLayers | None:
        if not extensions:
            return None
        custom = CustomLayers()
        for defs in extensions:  # later files override earlier ones
            custom.defs.update(defs)
        return custom

    def compute(self, pool, plan, inputs: dict, perf: list | None, out: dict | None = None) -> dict:
        try:
            return super().compute(pool, plan, inputs, perf, out)
        except DeviceTimeout as exc:
            log.error("%s; the daemon exits so that a fresh one gets the device", exc.message)
            timer = threading.Timer(EXIT_GRACE_S, os._exit, args=(3,))
            timer.daemon = True
            timer.start()
            raise DeviceTimeout(exc.message + ". The GPU daemon exits now (its device is held by that kernel); the "
                                "next request starts a fresh one") from None

    def make_pool(self, key, network, extensions, shapes, description, extra_outputs=None):
        pool = GpuPool(key, network, self._custom(extensions), shapes, self.device, description, extra_outputs)
        # what the network got (get_config / get_metric): its storage precision; two requests in flight
        # let one's transfers overlap the other's kernels on the device's one queue each
        pool.settings = {"INFERENCE_PRECISION_HINT": "f16" if pool.plan.precision == "FP16" else "f32",
                         "OPTIMAL_NUMBER_OF_INFER_REQUESTS": max(1, min(2, self.threads))}
        return pool

    def query(self, network, extensions) -> dict[str, str]:
        return {name: self.DEVICE for name in query_network(network, self._custom(extensions))}

    def status_extra(self) -> dict:
        return {"opencl_device": self.device.describe()}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="GPU", help="GPU (the first OpenCL GPU, else any OpenCL device) or "
                                                        "GPU.N (the N-th OpenCL device); MO_CORE_OPENCL_DEVICE "
                                                        "overrides plain GPU")


def _check_device(opts: argparse.Namespace) -> None:
    try:
        parse_device_name(opts.device)
        open_device(opts.device)
    except DeviceError as exc:
        raise ValueError(str(exc)) from None
    opts.device = opts.device.strip().upper()


def main(argv: list[str] | None = None) -> int:
    return serve_daemon(argv, "gpu", lambda server, opts: GpuDaemon(opts.device, threads=opts.threads,
                                                                     endpoint=server.endpoint),
                        add_arguments=_add_arguments, before_bind=_check_device,
                        description="mo-core GPU (OpenCL) inference daemon")
