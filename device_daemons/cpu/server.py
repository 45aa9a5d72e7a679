"""The CPU daemon: runs IR networks with the numpy ExecutionPlan for any number of
clients, over the microkernel protocol (core/microkernel).

    python -m device_daemons.cpu --endpoint EP [--parent-pid PID|0] [--key-file F]
                                 [--threads N] [--no-record]

Verbs (args -> result; arrays travel as raw frames):

* load_network {xml, bin | xml_text, bin_data (uint8 array), kernels: [paths],
  batch, shapes: {input: dims}} -> {handle, name, inputs: {name: {shape,
  precision}}, outputs: {...}, cached, warnings}. Paths are read by the daemon
  (same machine); xml_text + bin_data let a client on another machine send the IR
  itself. `kernels` are custom CPU kernel files (Python, on the daemon's machine).
* infer {handle, inputs: {name: array}, perf} -> {outputs: {name: array}, compute_us,
  perf: [{name, type, backend, status, ms}] when perf is true (a row per step, in
  order; fused layers with status "fused")}
* infer on the fast lane (the endpoint `hello` gives as lanes.fast): the same,
  served by a thread of its own with no hand-off (microkernel Server lanes), for
  networks that compute in well under a millisecond (compute_us), where the two
  thread hand-offs of the pool cost more than the network itself. The daemon
  serves there only networks it measured below contract.fast_lane_max_us() and
  without custom kernels (whose time may depend on the data); others get kind
  "not_fast" and go to the main endpoint
* reshape {handle, shapes: {input: dims}} -> like load_network (same handle)
* unload {handle} -> {}
* add_extension {path, check_only} -> {types: [...]}: register a custom kernel
  file for every later load (check_only: just import it and report its types)
* status {} -> {device, pid, started, uptime, endpoint, version, threads,
  requests, networks: [...], cached_plans, extensions, shm_slots}
* shm_create {size} -> {slot, path, name}; shm_detach {slot} -> {}: the
  shared-memory fast path of local clients (below)
plus the microkernel's built-in hello / ping / shutdown.

Shared-memory fast path: a local client's inputs and outputs travel in a sealed
memfd slot (made by the daemon) that both processes map; only a small header goes over the socket (the
protocol: device_daemons/shm_protocol.py; this daemon's side: shm_slots.py).

Threading: the microkernel Server runs handlers on a pool of `--threads` threads
(default: the number of CPUs, at most 4); each compiled network owns a small pool
of plan instances, so requests for one network run in parallel (plan_pool.py).

Caching: compiled networks are cached per (xml + bin identity - path, size and
mtime, or the sha256 of sent content - custom kernel files with their mtimes,
batch, input shapes). Loading the same IR again returns a new handle on the
cached plans at once; up to `_IDLE_CACHE` networks no handle uses stay cached.
Handles are per load, so reshaping one client's handle never changes another's.

Errors a client can fix come back as RemoteError kinds: "network" (the IR cannot
be read or compiled, e.g. a layer type without a kernel), "kernel" (a custom
kernel file is bad or a kernel failed), "input" (bad input name, shape or dtype),
"handle" (unknown handle: the daemon was restarted; the client re-loads).
"""
from __future__ import annotations

import argparse
import itertools
import logging
import math
import os
import stat
import sys
import threading
import time

import msgpack
import numpy as np

from core.microkernel import RemoteError, Server, serve_main
from ir import IRError

from .. import registry
from ..contract import MAX_TENSOR_ELEMENTS, fast_lane_max_us
from .caffe_backed import CaffeWorkerPool, caffe_backed_kernels
from .kernels import KERNELS
from .ir_source import IRSource
from .plan_pool import Handle, PlanPool
from .shm_slots import ShmSlots, input_views, place_outputs, unpack_shm

DEVICE = "CPU"
# poll without sleeping this long after each request (Server(spin=...)); MO_CORE_SPIN_US=0 turns it off
SPIN_S = float(os.environ.get("MO_CORE_SPIN_US", "500")) / 1e6
log = logging.getLogger("mo_core.daemon.cpu")

_IDLE_CACHE = 4  # compiled networks kept while no handle uses them


def _err(kind: str, message: str) -> RemoteError:
    return RemoteError(kind, message)


def _ir_error(exc: IRError, default_kind: str) -> RemoteError:
    from .kernels import KernelError
    kind = "kernel" if isinstance(exc, KernelError) and "no kernel for layer type" not in exc.message \
        else default_kind
    return RemoteError(kind, str(exc), exc.faq)


def _shape_list(value, where: str) -> tuple:
    if not isinstance(value, (list, tuple)) or not value or len(value) > 8 or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in value):
        raise _err("input", f"{where} must be a list of 1 to 8 positive integers, got {value!r:.80}")
    if math.prod(value) > MAX_TENSOR_ELEMENTS:
        raise _err("input", f"{where} {list(value)!r:.80} has {math.prod(value)} elements, more than "
                            f"this daemon's limit of {MAX_TENSOR_ELEMENTS}")
    return tuple(value)


class CpuDaemon:
    """State and verbs of the CPU daemon (independent of the socket: testable)."""

    def __init__(self, threads: int = 2, endpoint: str = "", caffe_fallback: bool = False) -> None:
        self.threads = max(1, threads)
        # layers only Caffe knows run through a Caffe worker (see caffe_backed.py)
        self.caffe_pool = CaffeWorkerPool() if caffe_fallback else None
        self.endpoint = endpoint
        self.started = time.time()
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._handles: dict[int, Handle] = {}
        self._pools: dict[tuple, PlanPool] = {}
        self._building: dict[tuple, threading.Lock] = {}
        self._ids = itertools.count(1)
        self._extensions: list[str] = []  # registered with add_extension, in order
        self._kernel_files: dict[tuple, dict] = {}  # file identity -> {type: class}
        self._kernel_lock = threading.Lock()
        self.shm = ShmSlots()
        self.requests = 0
        self.fast_requests = 0

    def register(self, server: Server) -> None:
        server.handle("load_network", self.load_network)
        server.handle("infer", self.infer)
        server.handle("infer", self.infer_fast, lane="fast")
        server.handle("reshape", self.reshape)
        server.handle("unload", self.unload, inline=True)
        server.handle("add_extension", self.add_extension)
        server.handle("status", self.status, inline=True)
        server.handle("shm_create", self.shm_create)
        server.handle("shm_detach", self.shm_detach, inline=True)

    # ----------------------------------------------------------------- kernels
    def _kernels(self, path: str) -> tuple[tuple, dict]:
        """(identity, {type: class}) of a custom kernel file, imported once per version."""
        from .plan import load_custom_kernels
        if not isinstance(path, str) or not path:
            raise _err("kernel", f"a custom kernel file must be a path, got {path!r:.80}")
        path = os.path.abspath(path)
        try:
            st = os.stat(path)
        except OSError:
            raise _err("kernel", f"cannot find the custom kernel file {path} on the daemon's machine; "
                                 f"check the path given to -l / add_extension") from None
        if not stat.S_ISREG(st.st_mode):
            raise _err("kernel", f"the custom kernel file {path} is not a regular file (a FIFO, "
                                 f"device or directory)")
        if st.st_uid not in (os.getuid(), 0) or st.st_mode & 0o022:
            # the daemon runs this code: never a file another local user could have
            # written (a loopback tcp endpoint lets other local users connect)
            raise _err("kernel", f"refusing the custom kernel file {path}: it must be owned by the "
                                 f"daemon's user (or root) and not writable by group or others")
        ident = (path, st.st_size, st.st_mtime_ns)
        with self._kernel_lock:
            found = self._kernel_files.get(ident)
            if found is None:
                try:
                    found = load_custom_kernels(path)
                except IRError as exc:
                    raise _err("kernel", str(exc)) from None
                except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt, SystemExit at import
                    raise _err("kernel", f"importing the custom kernel file {path} raised "
                                         f"{type(exc).__name__}: {exc}") from None
                self._kernel_files[ident] = found
        return ident, found

    def add_extension(self, args: dict, arrays: list) -> dict:
        path = args.get("path")
        ident, found = self._kernels(path)
        if not args.get("check_only"):
            with self._lock:
                if ident[0] not in self._extensions:
                    self._extensions.append(ident[0])
        return {"path": ident[0], "types": sorted(found)}

    # ----------------------------------------------------------------- networks
    def _source(self, args: dict, arrays: list) -> IRSource:
        """The IR a load_network request names (files, or content it sends)."""
        if args.get("xml") is not None:
            return IRSource.from_files(args.get("xml"), args.get("bin"))
        if args.get("xml_text") is None:
            raise _err("network", "load_network needs 'xml' (+ 'bin') paths or 'xml_text' + 'bin_data'")
        return IRSource.from_content(args.get("xml_text"), args.get("bin_data"))

    def _pool_for(self, key: tuple, build) -> tuple[PlanPool, bool]:
        """The cached pool for `key`, or a new one (built once even if asked twice)."""
        with self._lock:
            pool = self._pools.get(key)
            if pool is not None:
                pool.refs += 1
                return pool, True
            building = self._building.setdefault(key, threading.Lock())
        with building:
            with self._lock:
                pool = self._pools.get(key)
                if pool is not None:
                    pool.refs += 1
                    return pool, True
            try:
                pool = build()
            finally:
                with self._lock:
                    self._building.pop(key, None)
            with self._lock:
                pool.refs += 1
                self._pools[key] = pool
                self._evict()
            return pool, False

    def _evict(self) -> None:
        idle = sorted((p for p in self._pools.values() if p.refs == 0), key=lambda p: p.last_used)
        for pool in idle[:max(0, len(idle) - _IDLE_CACHE)]:
            self._pools.pop(pool.key, None)

    def _release(self, pool: PlanPool) -> None:
        with self._lock:
            pool.refs -= 1
            pool.last_used = time.monotonic()
            self._evict()

    def _shapes_arg(self, value) -> dict | None:
        if value is not None and not isinstance(value, dict):
            raise _err("input", "'shapes' must be a map {input name: dims}")
        shapes = {str(k): _shape_list(v, f"the shape of input {k!r}") for k, v in (value or {}).items()}
        return shapes or None

    def _describe(self, handle: Handle, cached: bool) -> dict:
        pool = handle.pool
        return {"handle": handle.id, "name": pool.name, "inputs": pool.inputs, "outputs": pool.outputs,
                "cached": cached, "warnings": pool.warnings, "fast_ok": not pool.custom}

    def _get_pool(self, ident: tuple, loader, description: str, kernel_paths: list,
                  shapes: dict | None, batch: int | None) -> tuple[PlanPool, bool]:
        """The compiled network for this request (cached by what the request asks)."""
        with self._lock:
            kernel_paths = list(self._extensions) + [p for p in kernel_paths if p not in self._extensions]
        kernels: dict = {}
        kernel_ids = []
        for path in kernel_paths:  # later files override earlier ones
            kid, found = self._kernels(path)
            kernel_ids.append(kid)
            kernels.update(found)
        key = (ident, tuple(kernel_ids), batch, tuple(sorted(shapes.items())) if shapes else None)

        def build() -> PlanPool:
            try:
                network = loader()
                if self.caffe_pool is not None:
                    kernels.update(caffe_backed_kernels(network, self.caffe_pool, set(KERNELS) | set(kernels)))
                names = [layer.name for layer in network.inputs()]
                resolved = dict(shapes or {})
                unknown = set(resolved) - set(names)
                if unknown:
                    raise _err("input", f"no input named {', '.join(sorted(map(repr, unknown)))}; the "
                                        f"network's inputs are {', '.join(map(repr, names)) or 'none'}")
                if batch is not None:  # the batch applies to every input
                    for layer in network.inputs():
                        dims = resolved.get(layer.name, tuple(layer.outputs[0].dims))
                        resolved[layer.name] = (batch,) + tuple(dims[1:])
                pool = PlanPool(key, network, kernels, resolved or None, self.threads, description)
            except IRError as exc:
                raise _ir_error(exc, "network") from None
            except MemoryError:
                raise _err("network", f"{description}: not enough memory to compile the network at "
                                      f"these shapes") from None
            pool.load_args = (ident, description, kernel_paths)
            return pool
        return self._pool_for(key, build)

    def load_network(self, args: dict, arrays: list) -> dict:
        kernel_paths = args.get("kernels") or []
        if not isinstance(kernel_paths, list) or not all(isinstance(p, str) for p in kernel_paths):
            raise _err("kernel", "'kernels' must be a list of file paths")
        kernel_paths = [os.path.abspath(p) for p in kernel_paths]
        batch = args.get("batch")
        if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1
                                  or batch > MAX_TENSOR_ELEMENTS):
            raise _err("input", f"batch must be a positive integer, got {batch!r:.40}")
        shapes = self._shapes_arg(args.get("shapes"))
        source = self._source(args, arrays)
        try:
            pool, cached = self._get_pool(source.ident, source.load, source.description, kernel_paths,
                                          shapes, batch)
        finally:
            source.close()
        with self._lock:
            handle = Handle(next(self._ids), pool)
            self._handles[handle.id] = handle
        log.info("loaded %s as handle %d%s", source.description, handle.id, " (cached)" if cached else "")
        return self._describe(handle, cached)

    def _handle(self, args: dict) -> Handle:
        hid = args.get("handle")
        handle = self._handles.get(hid) if isinstance(hid, int) else None
        if handle is None:
            raise _err("handle", f"no network with handle {hid!r:.20} is loaded in this daemon "
                                 f"(pid {os.getpid()}); it may have been restarted: load the network again")
        return handle

    def reshape(self, args: dict, arrays: list) -> dict:
        handle = self._handle(args)
        shapes = self._shapes_arg(args.get("shapes"))
        if not shapes:
            raise _err("input", "reshape needs 'shapes': {input name: dims}")
        old = handle.pool
        unknown = set(shapes) - set(old.inputs)
        if unknown:
            raise _err("input", f"reshape: no input named {', '.join(sorted(map(repr, unknown)))}; the "
                                f"network's inputs are {', '.join(map(repr, old.inputs))}")
        merged = {n: tuple(shapes.get(n, info["shape"])) for n, info in old.inputs.items()}
        ident, description, kernel_paths = old.load_args
        network = old.network
        pool, cached = self._get_pool(ident, lambda: network, description, kernel_paths, merged, None)
        handle.pool = pool
        self._release(old)
        return self._describe(handle, cached)

    def unload(self, args: dict, arrays: list) -> dict:
        handle = self._handle(args)
        with self._lock:
            self._handles.pop(handle.id, None)
        self._release(handle.pool)
        return {}

    # ----------------------------------------------------------------- inference
    def shm_create(self, args: dict, arrays: list) -> dict:
        return self.shm.create(args.get("size"))

    def shm_detach(self, args: dict, arrays: list) -> dict:
        self.shm.detach(args.get("slot"))
        return {}

    def infer_fast(self, args: dict, arrays: list):
        """`infer` on the fast lane (its own thread, no hand-off): only for networks the
        daemon measured to compute in less than fast_lane_max_us(), so that no request
        holds the lane longer; others are refused with kind "not_fast"."""
        handle = self._handle(args)
        self.fast_requests += 1  # a statistic (status): racing updates only blur it
        if not handle.pool.fast_ok:
            raise _err("not_fast", f"network {handle.pool.name!r} is not served on the fast lane (it has custom "
                                   f"kernels, or it computes in more than {fast_lane_max_us():g} us, or it "
                                   f"was not measured yet); send it to the main endpoint")
        return self.infer(args, arrays)

    def infer(self, args: dict, arrays: list):
        handle = self._handle(args)
        shm = args.get("shm")
        slot = None
        if shm is not None:
            shm = unpack_shm(shm)
            slot = self.shm.get(shm.get("slot"))
            inputs = input_views(slot, shm["inputs"])
        else:
            inputs = args.get("inputs")
            if not isinstance(inputs, dict) or not all(isinstance(v, np.ndarray) for v in inputs.values()):
                raise _err("input", "'inputs' must be a map {input name: array}")
        pool = handle.pool
        perf = [] if args.get("perf") else None  # per-layer times (PERF_COUNT, -pc)
        with pool.acquire() as plan:
            t0 = time.perf_counter()
            try:
                outputs = plan.infer(inputs, perf, concurrent=pool.busy)
            except IRError as exc:
                raise _ir_error(exc, "input") from None
            compute_us = int((time.perf_counter() - t0) * 1e6)
            pool.observe(compute_us)
            # (inside the plan's lease: a custom kernel may hand out a buffer it reuses)
            placed = place_outputs(slot, shm.get("out"), outputs) if slot is not None else None
            if placed is None and pool.custom:
                # the reply is sent later by the I/O thread, after this plan may run again
                outputs = {k: np.array(v, copy=True) for k, v in outputs.items()}
        handle.requests += 1  # not atomic across threads: a statistic only
        with self._lock:
            self.requests += 1
        reply = {"compute_us": compute_us}
        if perf is not None:
            reply["perf"] = [c.as_dict() for c in perf]
        if placed is not None:
            reply["outputs_shm"] = msgpack.packb(placed)
        else:
            reply["outputs"] = outputs
        return reply

    # ----------------------------------------------------------------- status
    def status(self, args: dict, arrays: list) -> dict:
        with self._lock:
            handles = list(self._handles.values())
            cached = len(self._pools)
            extensions = list(self._extensions)
            requests = self.requests
        networks = [{"handle": h.id, "name": h.pool.name, "source": h.pool.source,
                     "inputs": {n: i["shape"] for n, i in h.pool.inputs.items()},
                     "requests": h.requests, "instances": h.pool.instances} for h in handles]
        return {"device": DEVICE, "pid": os.getpid(), "started": self.started,
                "uptime": time.monotonic() - self._t0, "endpoint": self.endpoint,
                "version": registry.package_version(), "threads": self.threads,
                "requests": requests, "fast_requests": self.fast_requests, "networks": networks,
                "cached_plans": cached,
                "extensions": extensions, "shm_slots": len(self.shm)}


def _stderr_file() -> str | None:
    try:
        path = os.readlink("/proc/self/fd/2")
    except OSError:
        return None
    return path if path.startswith("/") and os.path.isfile(path) else None


def _say(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} [ cpu ] {text}", file=sys.stderr, flush=True)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-record", action="store_true",
                        help="do not record this daemon in the runtime directory (a private "
                             "instance that clients do not find by themselves)")
    parser.add_argument("--caffe-fallback", action="store_true",
                        help="run layers without a kernel that Caffe knows through a Caffe worker process")


def _before_bind(opts: argparse.Namespace) -> None:
    if opts.threads < 1:
        raise ValueError("--threads must be >= 1")
    if not opts.no_record:
        other = registry.read_record(DEVICE)
        if other is not None and other["pid"] != os.getpid():
            raise ValueError(f"a CPU daemon already runs (pid {other['pid']} at "
                             f"{other['endpoint']}); stop it first with 'mo-core daemon stop'")


def _setup(server: Server, opts: argparse.Namespace):
    daemon = CpuDaemon(threads=opts.threads, endpoint=server.endpoint, caffe_fallback=opts.caffe_fallback)
    daemon.register(server)
    recorded = False
    if not opts.no_record:
        registry.write_record(DEVICE, os.getpid(), server.endpoint, key_file=opts.key_file,
                              log=_stderr_file(), started=daemon.started)
        recorded = True
    _say(f"pid {os.getpid()} serving at {server.endpoint} ({opts.threads} threads, version "
         f"{registry.package_version()})")

    def cleanup(reason: str) -> None:
        if recorded:
            registry.remove_record(DEVICE, os.getpid())
        if daemon.caffe_pool is not None:
            daemon.caffe_pool.stop()
        daemon.shm.close()
        _say(f"pid {os.getpid()} stopped: {reason} ({daemon.requests} inference requests served)")
    return cleanup


def main(argv: list[str] | None = None) -> int:
    return serve_main(argv, "cpu", _setup, add_arguments=_add_arguments, before_bind=_before_bind,
                      threads=min(4, os.cpu_count() or 1), parent_pid=0, spin=SPIN_S, timestamps=True,
                      description="mo-core CPU inference daemon")
