"""The CPU daemon: runs IR networks with the ExecutionPlan (oneDNN and numpy kernels,
cpu/backends.py) for any number of clients, over the microkernel protocol
(core/microkernel).

    python -m device_daemons.cpu --endpoint EP [--parent-pid PID|0] [--key-file F]
                                 [--threads N] [--no-record] [--caffe-fallback
                                 [--python-path DIR ...]]

The verbs, caching, handles, shared memory and errors are every daemon's
(device_daemons/service/). The CPU's own parts: extensions are custom CPU
kernel files (Python classes, plan.load_custom_kernels); a compiled network is a
PlanPool of ExecutionPlan instances (plan_pool.py): a plan is not thread-safe, so
requests for one network borrow an instance each and run in parallel (oneDNN
then gives each cpus / requests-in-flight threads: compute()); with
--caffe-fallback, layers that have no kernel but that Caffe knows run through a
Caffe worker of the daemon (caffe_backed.py); TFCustomSubgraphCall layers run
through a TF worker of the daemon (tf_backed.py). query_network: the layers with
a kernel (built-in, custom, or Caffe-backed). Load config: INFERENCE_PRECISION_HINT
(f32 | bf16; default bf16 where the CPU has it) and INFERENCE_NUM_THREADS
(precision.py); the reply says what the network got, with
OPTIMAL_NUMBER_OF_INFER_REQUESTS.
"""
from __future__ import annotations

import argparse
import os
import time

from core.microkernel import RemoteError
from ir import IRError

from ..service import DeviceDaemon, serve_daemon
from . import teams
from .caffe_backed import CaffeWorkerPool, caffe_backed_kernels
from .kernels import KERNELS
from .plan_pool import PlanPool
from .precision import CPUS, PRECISION_KEY, THREADS_KEY, resolve_precision, resolve_threads

DEVICE = "CPU"


class CpuDaemon(DeviceDaemon):
    """State and verbs of the CPU daemon (independent of the socket: testable)."""

    DEVICE = DEVICE
    EXTENSION = "custom kernel file"

    def __init__(self, threads: int = 2, endpoint: str = "", caffe_fallback: bool = False,
                 python_path: list[str] | None = None) -> None:
        super().__init__(threads, endpoint)
        # layers only Caffe knows run through a Caffe worker (see caffe_backed.py)
        self.caffe_pool = CaffeWorkerPool(python_path) if caffe_fallback else None

    def load_extension(self, path: str) -> dict:
        from .plan import load_custom_kernels
        return load_custom_kernels(path)

    @staticmethod
    def _merged(extensions: list) -> dict:
        kernels: dict = {}
        for mapping in extensions:  # later files override earlier ones
            kernels.update(mapping)
        return kernels

    def check_config(self, config):
        unknown = set(config) - {PRECISION_KEY, THREADS_KEY}
        if unknown:
            raise RemoteError("network", f"the CPU daemon does not know the config key(s) {', '.join(sorted(unknown))}; "
                                 f"it takes {PRECISION_KEY} (f32, bf16) and {THREADS_KEY}")
        try:
            return {PRECISION_KEY: resolve_precision(config.get(PRECISION_KEY)),
                    THREADS_KEY: resolve_threads(config.get(THREADS_KEY))}
        except IRError as exc:
            raise RemoteError("network", str(exc)) from None

    def make_pool(self, key, network, extensions, shapes, description, extra_outputs=None, config=None):
        kernels = self._merged(extensions)
        if self.caffe_pool is not None:
            kernels.update(caffe_backed_kernels(network, self.caffe_pool, set(KERNELS) | set(kernels), set(kernels)))
        config = config or self.check_config({})  # the defaults: the CPU's precision, every CPU of the mask
        return PlanPool(key, network, kernels, shapes, self.threads, description, extra_outputs,
                        precision=config[PRECISION_KEY], threads=config[THREADS_KEY])

    def compute(self, pool, plan, inputs, perf, out=None):
        # requests side by side share the cores: oneDNN runs each with cpus / concurrent threads
        # (PlanPool.concurrent: those running, or as many as ran side by side a moment ago); one
        # that runs alone gets the team size its network's TeamChoice measures faster (plan_pool.py)
        team = pool.team
        if not pool.chooses_team():
            concurrent = pool.concurrent
            outputs = plan.infer(inputs, perf, concurrent=concurrent, out=out)
            teams.ran(team.team // max(1, concurrent))
            return outputs
        if perf is not None:  # (-pc: the choice's team, not timed for it)
            threads = team.chosen or team.team
            outputs = plan.infer(inputs, perf, concurrent=plan.threads // threads, out=out)
        else:
            threads = team.threads()
            t0 = time.perf_counter()
            outputs = plan.infer(inputs, None, concurrent=plan.threads // threads, out=out)
            team.observe(threads, time.perf_counter() - t0)
        teams.ran(threads)  # (this thread keeps an OpenMP team from now on: teams.py)
        return outputs

    def register(self, server) -> None:
        super().register(server)
        server.on_idle(self._idle, teams.IDLE_S)

    @staticmethod
    def _idle() -> float | None:
        """An idle connection thread frees its OpenMP team where another keeps one (teams.py)."""
        from .onednn.library import load
        return teams.idle(lambda: load().release_team())

    def spare_cpu(self, pool) -> bool:
        # a one-thread request running alone leaves a CPU to a client polling for its reply; a team of every
        # CPU does not (the SSD export beside a polling client: 1.03 ms a request instead of 0.47, in some
        # daemons' lifetimes), nor does a choice still measuring both team sizes
        return pool.team.chosen == 1 and pool.busy <= 1 and CPUS > 1

    def network_status(self, pool) -> dict:
        return {"threads": pool.team.chosen}

    def query(self, network, extensions) -> dict[str, str]:
        known = set(KERNELS) | set(self._merged(extensions)) | {"Input"}
        return {layer.name: DEVICE for layer in network.layers if layer.type in known}

    def cleanup(self) -> None:
        if self.caffe_pool is not None:
            self.caffe_pool.stop()
        from .tf_backed import stop_worker  # TFCustomSubgraphCall layers' TF worker (tf_backed.py)
        stop_worker()
        super().cleanup()


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--caffe-fallback", action="store_true",
                        help="run layers without a kernel that Caffe knows through a Caffe worker process")
    parser.add_argument("--python-path", action="append", default=[], metavar="DIR",
                        help="with --caffe-fallback: a directory Caffe Python layers may be imported from "
                             "(may be repeated; no other module is imported for them)")


def _check_options(opts: argparse.Namespace) -> None:
    if opts.python_path and not opts.caffe_fallback:
        raise ValueError("--python-path is for Caffe Python layers: it needs --caffe-fallback")
    for directory in opts.python_path:
        if not os.path.isdir(directory):
            raise ValueError(f"--python-path {directory} is not a directory")


def _daemon(server, opts) -> CpuDaemon:
    return CpuDaemon(threads=opts.threads, endpoint=server.endpoint, caffe_fallback=opts.caffe_fallback,
                     python_path=[os.path.abspath(p) for p in opts.python_path])


def main(argv: list[str] | None = None) -> int:
    return serve_daemon(argv, "cpu", _daemon, add_arguments=_add_arguments, before_bind=_check_options,
                        description="mo-core CPU inference daemon")
