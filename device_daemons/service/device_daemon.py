"""What every device daemon does the same way (the CPU and the GPU daemon are
subclasses): the verbs, the cache of compiled networks, handles, bound requests,
status, and the command-line entry over the microkernel's serve_main.

Verbs, their arguments, results and error kinds: device_daemons/contract.py
(every request is parsed with it). Two ways in, one per kind of client:
* the main socket (ZeroMQ; its worker pool computes): every verb; `infer` takes
  and returns arrays as message frames. Remote clients, and the fallback of local
  ones;
* the local carrier (a Unix socket beside it, core/microkernel/direct.py; each
  connection computes on a thread of its own, no hand-off): a local client binds a
  network to a shared-memory slot once (`infer_bind`; slots: shm_create on the
  main socket, the daemon's side of them: shm_slots.py) and then sends each
  request as a small raw datagram, its inputs and outputs in the slot
  (bound_protocol.py; the table: bound_table.py).
IR files are opened safely (ir_source.py).

Caching: compiled networks are cached per (xml + bin identity - path, size and
mtime, or the sha256 of sent content - extension files with their mtimes, batch,
input shapes). Loading the same IR again returns a new handle on the cached plans
at once; up to `IDLE_CACHE` networks no handle uses stay cached. Handles are per
load, so reshaping one client's handle never changes another's.

Errors a client can fix come back as RemoteError kinds: "network" (the IR cannot
be read or compiled, e.g. a layer type without a kernel), "kernel" (an extension
file is bad or a kernel failed), "input" (bad input name, shape or dtype),
"handle" (unknown handle: the daemon was restarted; the client re-loads).

A subclass sets DEVICE and implements load_extension(path) (-> {type: anything}),
make_pool(key, network, extensions, shapes, description, extra_outputs) (-> a
pool with the interface of cpu/plan_pool.PlanPool, whose plans have
infer(inputs, perf)) and query(network, extensions); it may add compute() (how a
request runs on a plan), status_extra() and cleanup().
"""
from __future__ import annotations

import argparse
import logging
import os
import secrets
import stat
import sys
import threading
import time
from functools import partial

import numpy as np

from core.microkernel import RemoteError, Server, serve_main, sleep_after_reply
from ir import IRError

from .. import bound_protocol as bound
from .. import contract, registry
from ..plan_io import KernelError
from .bound_table import Binding, BoundTable
from .ir_source import IRSource
from .process_watch import ProcessWatch
from .record import write_record
from .shm_slots import ShmSlots, input_views, output_layout

# poll without sleeping this long after each request (Server(spin=...)); MO_CORE_SPIN_US=0 turns it off
SPIN_S = bound.SPIN_S
IDLE_CACHE = 4  # compiled networks kept while no handle uses them
log = logging.getLogger("mo_core.daemon")


class Handle:
    """A client's handle on a compiled network's pool (one per load_network; reshape
    moves it to another pool)."""
    __slots__ = ("id", "pool", "requests", "created", "owner")

    def __init__(self, handle_id: int, pool, owner: int | None = None):
        self.id = handle_id
        self.pool = pool
        self.requests = 0
        self.created = time.time()
        self.owner = owner  # the loading client's pid, watched (process_watch.py): its end unloads it


def err(kind: str, message: str) -> RemoteError:
    return RemoteError(kind, message)


def ir_error(exc: IRError, default_kind: str) -> RemoteError:
    """The RemoteError of an IRError: its own `kind` when it has one (a GPU build
    error is "kernel", an unsupported layer "network"), "kernel" for a kernel that
    failed, else `default_kind`."""
    kind = getattr(exc, "kind", None)
    if kind is None:
        kind = "kernel" if isinstance(exc, KernelError) and "no kernel for layer type" not in exc.message \
            else default_kind
    return RemoteError(kind, str(exc), exc.faq)


class DeviceDaemon:
    """State and verbs of a device daemon (independent of the socket: testable)."""

    DEVICE = ""
    EXTENSION = "extension file"   # how messages name the device's extension files

    def __init__(self, threads: int = 2, endpoint: str = "") -> None:
        self.threads = max(1, threads)
        self.endpoint = endpoint
        self.started = time.time()
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._handles: dict[int, Handle] = {}
        self._owners = ProcessWatch()  # the processes that loaded networks (a killed client's go)
        self._pools: dict[tuple, object] = {}
        self._building: dict[tuple, threading.Lock] = {}
        self._extensions: list[str] = []  # registered with add_extension, in order
        self._extension_files: dict[tuple, dict] = {}  # file identity -> {type: ...}
        self._extension_lock = threading.Lock()
        self.bindings = BoundTable()
        self.shm = ShmSlots(on_drop=self.bindings.drop_slot)
        self.requests = 0
        self.local_requests = 0  # served on the local carrier (bound requests)
        self.plans_built = 0  # networks compiled (a cache hit compiles nothing)

    # ----------------------------------------------------------------- device hooks
    def load_extension(self, path: str) -> dict:
        """{type: ...} of an extension file (IRError when it is bad)."""
        raise NotImplementedError

    def make_pool(self, key: tuple, network, extensions: list, shapes: dict | None, description: str,
                  extra_outputs=None):
        """The compiled network (a PlanPool-like pool) for these extension mappings; a
        daemon that takes a load config (check_config) gets it as `config=`. The pool's
        `settings` (if any) is what the load reply's config says the network got."""
        raise NotImplementedError

    def check_config(self, config: dict) -> dict:
        """The load config this device takes, checked (RemoteError "network" otherwise)."""
        raise err(contract.NETWORK, f"the {self.DEVICE} daemon takes no load config; got "
                                    f"{', '.join(sorted(config))}")

    def query(self, network, extensions: list) -> dict[str, str]:
        raise NotImplementedError

    def compute(self, pool, plan, inputs: dict, perf: list | None, out: dict | None = None) -> dict:
        """Runs one request on a plan lent by `pool`; with `perf` (a list) the plan
        appends a contract.PerfRow per step. `out`: where outputs may be written (views
        of the client's shared-memory slot; a daemon that ignores it gets them copied)."""
        return plan.infer(inputs, perf)

    def spare_cpu(self, pool) -> bool:
        """Did the request `pool` just computed leave a CPU free, so that its client may
        poll for the reply (bound_protocol.SPARE_CPU)? A device computing elsewhere does."""
        return True

    def status_extra(self) -> dict:
        return {}

    def network_status(self, pool) -> dict:
        """The device's own entries of a network's row in `status`."""
        return {}

    def cleanup(self) -> None:
        self.bindings.clear()
        self.shm.close()
        self._owners.close()

    def register(self, server: Server) -> None:
        server.handle(contract.LOAD_NETWORK, self.load_network)
        server.handle(contract.INFER, self.infer)
        server.handle(contract.RESHAPE, self.reshape)
        server.handle(contract.UNLOAD, self.unload, inline=True)
        server.handle(contract.ADD_EXTENSION, self.add_extension)
        server.handle(contract.QUERY_NETWORK, self.query_network)
        server.handle(contract.STATUS, self.status, inline=True)
        server.handle(contract.SHM_CREATE, self.shm_create)
        server.handle(contract.SHM_DETACH, self.shm_detach, inline=True)
        server.handle(bound.INFER_BIND, self.infer_bind, lane="local")
        server.handle_raw(bound.RAW_INFER, self.infer_bound)

    # ----------------------------------------------------------------- extensions
    def _extension(self, path: str) -> tuple[tuple, dict]:
        """(identity, {type: ...}) of an extension file, loaded once per version."""
        what = self.EXTENSION
        path = os.path.abspath(path)
        try:
            st = os.stat(path)
        except OSError:
            raise err("kernel", f"cannot find the {what} {path} on the daemon's machine; "
                                f"check the path given to add_extension / the command line") from None
        if not stat.S_ISREG(st.st_mode):
            raise err("kernel", f"the {what} {path} is not a regular file (a FIFO, device or directory)")
        if st.st_uid not in (os.getuid(), 0) or st.st_mode & 0o022:
            # the daemon runs this code: never a file another local user could have
            # written (a loopback tcp endpoint lets other local users connect)
            raise err("kernel", f"refusing the {what} {path}: it must be owned by the "
                                f"daemon's user (or root) and not writable by group or others")
        ident = (path, st.st_size, st.st_mtime_ns)
        with self._extension_lock:
            found = self._extension_files.get(ident)
            if found is None:
                try:
                    found = self.load_extension(path)
                except IRError as exc:
                    raise err("kernel", str(exc)) from None
                except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt, SystemExit at import
                    raise err("kernel", f"loading the {what} {path} raised "
                                        f"{type(exc).__name__}: {exc}") from None
                self._extension_files[ident] = found
        return ident, found

    def add_extension(self, args: dict, arrays: list) -> dict:
        path, check_only = contract.parse_add_extension(args)
        ident, found = self._extension(path)
        if not check_only:
            with self._lock:
                if ident[0] not in self._extensions:
                    self._extensions.append(ident[0])
        return {"path": ident[0], "types": sorted(found)}

    def _extension_list(self, paths: list) -> tuple[list, list]:
        """(identities, mappings) of the registered extensions then `paths` (later override earlier)."""
        with self._lock:
            paths = list(self._extensions) + [p for p in paths if p not in self._extensions]
        ids, found = [], []
        for path in paths:
            ident, mapping = self._extension(path)
            ids.append(ident)
            found.append(mapping)
        return ids, found

    # ----------------------------------------------------------------- networks
    @staticmethod
    def _source(req: contract.LoadArgs) -> IRSource:
        """The IR a request names (files, or content it sends)."""
        return IRSource.from_files(req.xml, req.bin) if req.xml is not None else \
            IRSource.from_content(req.xml_text, req.bin_data)

    def _pool_for(self, key: tuple, build):
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
        for pool in idle[:max(0, len(idle) - IDLE_CACHE)]:
            self._pools.pop(pool.key, None)

    def _release(self, pool) -> None:
        with self._lock:
            pool.refs -= 1
            pool.last_used = time.monotonic()
            self._evict()

    def _describe(self, handle: Handle, cached: bool) -> dict:
        pool = handle.pool
        return contract.network_result(handle.id, pool.name, pool.inputs, pool.outputs, cached, pool.warnings,
                                       getattr(pool, "settings", None))

    def _get_pool(self, ident: tuple, loader, description: str, paths: list, shapes: dict | None,
                  batch: int | None, extra_outputs: tuple = (), config: dict | None = None):
        """The compiled network for this request (cached by what the request asks)."""
        ext_ids, extensions = self._extension_list(paths)
        options = {"config": self.check_config(config)} if config else {}
        key = (ident, tuple(ext_ids), batch, tuple(sorted(shapes.items())) if shapes else None, extra_outputs,
               tuple(sorted(options["config"].items())) if options else None)

        def build():
            try:
                network = loader()
                names = [layer.name for layer in network.inputs()]
                resolved = dict(shapes or {})
                unknown = set(resolved) - set(names)
                if unknown:
                    raise err("input", f"no input named {', '.join(sorted(map(repr, unknown)))}; the "
                                       f"network's inputs are {', '.join(map(repr, names)) or 'none'}")
                if batch is not None:  # the batch applies to every input
                    for layer in network.inputs():
                        dims = resolved.get(layer.name, tuple(layer.outputs[0].dims))
                        resolved[layer.name] = (batch,) + tuple(dims[1:])
                pool = self.make_pool(key, network, extensions, resolved or None, description,
                                      list(extra_outputs) or None, **options)
                self.plans_built += 1
            except IRError as exc:
                raise ir_error(exc, "network") from None
            except MemoryError:
                raise err("network", f"{description}: not enough memory to compile the network at "
                                     f"these shapes") from None
            pool.load_args = (ident, description, paths, extra_outputs, config)
            return pool
        return self._pool_for(key, build)

    def load_network(self, args: dict, arrays: list) -> dict:
        req = contract.parse_load(args)
        self._reap_handles()  # (first: what ended clients held is freed before this network is built)
        paths = [os.path.abspath(p) for p in req.kernels]
        source = self._source(req)
        try:
            pool, cached = self._get_pool(source.ident, source.load, source.description, paths, req.shapes,
                                          req.batch, req.outputs, req.config)
        finally:
            source.close()
        with self._lock:
            handle_id = secrets.randbits(62) + 1  # unguessable: another client cannot name it (issue 21)
            while handle_id in self._handles:
                handle_id = secrets.randbits(62) + 1
            handle = Handle(handle_id, pool, req.owner if self._owners.watch(req.owner) else None)
            self._handles[handle.id] = handle
        settings = getattr(pool, "settings", None)
        log.info("loaded %s as handle %d%s%s", source.description, handle.id, " (cached)" if cached else "",
                 "".join(f", {k} {v}" for k, v in (settings or {}).items()))
        return self._describe(handle, cached)

    def query_network(self, args: dict, arrays: list) -> dict:
        req = contract.parse_load(args)
        source = self._source(req)
        try:
            network = source.load()
        except IRError as exc:
            raise ir_error(exc, contract.NETWORK) from None
        finally:
            source.close()
        _, extensions = self._extension_list([os.path.abspath(p) for p in req.kernels])
        return {"supported": self.query(network, extensions)}

    def _handle(self, args: dict) -> Handle:
        hid = contract.handle(args)
        handle = self._handles.get(hid)
        if handle is None:
            raise err("handle", f"no network with handle {hid!r:.20} is loaded in this daemon "
                                f"(pid {os.getpid()}); it may have been restarted: load the network again")
        return handle

    def reshape(self, args: dict, arrays: list) -> dict:
        handle = self._handle(args)
        shapes = contract.shapes(args.get("shapes"))
        if not shapes:
            raise err("input", "reshape needs 'shapes': {input name: dims}")
        old = handle.pool
        unknown = set(shapes) - set(old.inputs)
        if unknown:
            raise err("input", f"reshape: no input named {', '.join(sorted(map(repr, unknown)))}; the "
                               f"network's inputs are {', '.join(map(repr, old.inputs))}")
        merged = {n: tuple(shapes.get(n, info["shape"])) for n, info in old.inputs.items()}
        ident, description, paths, extra, config = old.load_args
        network = old.network
        pool, cached = self._get_pool(ident, lambda: network, description, paths, merged, None, extra, config)
        handle.pool = pool
        self._release(old)
        return self._describe(handle, cached)

    def unload(self, args: dict, arrays: list) -> dict:
        handle = self._handle(args)
        with self._lock:
            self._handles.pop(handle.id, None)
            self._owners.keep_only({h.owner for h in self._handles.values()})
        self._drop(handle)
        return {}

    def _drop(self, handle: Handle) -> None:
        self.bindings.drop_handle(handle)
        self._release(handle.pool)

    def _reap_handles(self) -> int:
        """Unloads the networks of client processes that ended without unloading them (a
        killed client's stayed for the daemon's life: 40 networks, +500 MiB); how many."""
        with self._lock:
            if not self._owners:
                return 0
            ended = self._owners.ended()
            gone = [h for h in self._handles.values() if h.owner in ended]
            for h in gone:
                del self._handles[h.id]
        for h in gone:
            log.info("unloaded handle %d of %s: its client (pid %d) ended", h.id, h.pool.name, h.owner)
            self._drop(h)
        return len(gone)

    # ----------------------------------------------------------------- inference
    def shm_create(self, args: dict, arrays: list) -> dict:
        size, pid = contract.parse_shm_create(args)
        return self.shm.create(size, pid)

    def shm_detach(self, args: dict, arrays: list) -> dict:
        self.shm.detach(contract.parse_shm_detach(args))
        return {}

    def infer_bind(self, args: dict, arrays: list) -> dict:
        """Bind the requests of a network through one slot (bound_protocol.py): the
        slot's views are made and checked once, here."""
        _, spec = bound.parse_bind(args)
        handle = self._handle(args)
        slot = self.shm.get(spec["slot"])
        inputs = input_views(slot, spec["inputs"])
        pool = handle.pool
        with pool.acquire() as plan:
            shapes = plan.output_shapes()
        layout = output_layout(slot, spec["out"], shapes)
        if layout is None:
            raise err(contract.SHM, f"the outputs of {pool.name!r} do not fit in the slot from offset "
                                    f"{spec['out'][0]} ({spec['out'][1]} bytes)")
        views, placed = layout
        return bound.bind_result(self.bindings.add(Binding(handle, pool, slot, inputs, views)), placed)

    def infer_bound(self, payload) -> bytes:
        """The raw verb RAW_INFER: run a bound request (8 bytes: its binding id) on the
        connection's own thread; the reply is (status, compute time in us, flags), and for
        a failed request its error as `infer` would report it."""
        if len(payload) != bound.REQUEST.size:
            return bound.failure(err(contract.INPUT, f"a bound request is {bound.REQUEST.size} bytes, "
                                                     f"not {len(payload)}"))
        (bid,) = bound.REQUEST.unpack(payload)
        b = self.bindings.get(bid)
        if b is None or b.slot.closed or self._handles.get(b.handle.id) is not b.handle or b.handle.pool is not b.pool:
            if b is not None:
                self.bindings.drop(bid)  # its slot or network is gone, or the network was reshaped
            return bound.REPLY.pack(bound.BOUND_UNKNOWN, 0, 0)
        pool = b.pool
        plan = pool.take()
        try:
            try:
                t0 = time.perf_counter()
                outputs = self.compute(pool, plan, b.inputs, None, b.outputs)
                compute_us = int((time.perf_counter() - t0) * 1e6)
                for name, view in b.outputs.items():
                    value = outputs.get(name)
                    if value is not view:  # (a plan that wrote it elsewhere)
                        np.copyto(view, value, casting="unsafe")
            except BaseException:
                pool.give(plan)
                raise
        except IRError as exc:
            return bound.failure(ir_error(exc, contract.INPUT))
        except RemoteError as exc:
            return bound.failure(exc)
        except BaseException as exc:  # noqa: BLE001 - as the main socket reports a handler's failure (SystemExit
            # from a custom kernel included: one error reply, never the connection)
            log.error("bound request failed: %s: %s", type(exc).__name__, exc)
            return bound.failure(err("internal", f"{type(exc).__name__}: {exc}"))
        b.handle.requests += 1  # (statistics: racing updates only blur them)
        with self._lock:
            self.requests += 1
            self.local_requests += 1
        # the reply goes out first, the plan goes back to the pool after it (the caches are cold
        # after a network's run: each line here costs the client microseconds)
        if self.spare_cpu(pool):
            flags = bound.SPARE_CPU
        else:  # (its client sleeps until the reply and needs a CPU then: this thread does not poll)
            flags = 0
            sleep_after_reply()
        return bound.REPLY.pack(bound.BOUND_OK, min(compute_us, 0xFFFFFFFF), flags), partial(pool.give, plan)

    def infer(self, args: dict, arrays: list):
        """`infer` on the main socket: inputs and outputs as message frames."""
        req = contract.parse_infer(args)
        handle = self._handle(args)
        pool = handle.pool
        perf = [] if req.perf else None  # per-layer times (PERF_COUNT, -pc)
        with pool.acquire() as plan:
            t0 = time.perf_counter()
            try:
                outputs = self.compute(pool, plan, req.inputs, perf)
            except IRError as exc:
                raise ir_error(exc, contract.INPUT) from None
            compute_us = int((time.perf_counter() - t0) * 1e6)
            if pool.custom:
                # (inside the plan's lease: a custom kernel may hand out a buffer it reuses, and
                # the reply is sent later by the I/O thread, after this plan may run again)
                outputs = {k: np.array(v, copy=True) for k, v in outputs.items()}
        handle.requests += 1  # not atomic across threads: a statistic only
        with self._lock:
            self.requests += 1
        return contract.infer_result(outputs, compute_us, perf)

    # ----------------------------------------------------------------- status
    def status(self, args: dict, arrays: list) -> dict:
        self._reap_handles()
        with self._lock:
            handles = list(self._handles.values())
            cached = len(self._pools)
            extensions = list(self._extensions)
            requests = self.requests
        networks = [{"handle": h.id, "name": h.pool.name, "source": h.pool.source,
                     "inputs": {n: i["shape"] for n, i in h.pool.inputs.items()},
                     "requests": h.requests, "instances": h.pool.instances, **self.network_status(h.pool)}
                    for h in handles]
        result = {"device": self.DEVICE, "pid": os.getpid(), "started": self.started,
                  "uptime": time.monotonic() - self._t0, "endpoint": self.endpoint,
                  "version": registry.package_version(), "build": registry.build_id(), "threads": self.threads,
                  "requests": requests, "local_requests": self.local_requests, "networks": networks,
                  "cached_plans": cached, "plans_built": self.plans_built, "extensions": extensions,
                  "shm_slots": len(self.shm), "bindings": len(self.bindings)}
        result.update(self.status_extra())
        return result


# --------------------------------------------------------------------------- the process

def _stderr_file() -> str | None:
    try:
        path = os.readlink("/proc/self/fd/2")
    except OSError:
        return None
    return path if path.startswith("/") and os.path.isfile(path) else None


def _replaced(device: str) -> str | None:
    """Why this daemon is no longer its device's: the record names another live daemon (a
    damaged record let a second one start, and clients find that one) - else None. An
    orphan would run on unmanaged; it stops instead (its clients reconnect to the other)."""
    record = registry.read_record(device)
    if record is not None and record["pid"] != os.getpid():
        return f"the {device} daemon of this runtime directory is now pid {record['pid']} (this one's record was lost)"
    return None


def serve_daemon(argv, name: str, make_daemon, *, add_arguments=None, before_bind=None,
                 description: str = "") -> int:
    """`python -m device_daemons.<name>`: serve_main with the daemons' options
    (--no-record) and life: refuse to start twice, record pid and endpoint in the
    runtime directory, remove the record when serving ends.
    make_daemon(server, opts) -> a DeviceDaemon; the record is named after
    opts.device when the daemon has that option (GPU.N), else after `name`;
    before_bind(opts) may refuse to start (ValueError: one `[ ERROR ]` line)."""
    def say(text: str) -> None:
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} [ {name} ] {text}", file=sys.stderr, flush=True)

    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--no-record", action="store_true",
                            help="do not record this daemon in the runtime directory (a private "
                                 "instance that clients do not find by themselves)")
        if add_arguments is not None:
            add_arguments(parser)

    def _relaunch_options(opts: argparse.Namespace) -> list[str]:
        """The options a replacement of this daemon (daemon.launch) starts it with again."""
        options = ["--threads", str(opts.threads)] if "--threads" in sys.argv else []
        if getattr(opts, "caffe_fallback", False):
            options.append("--caffe-fallback")
        for directory in getattr(opts, "python_path", None) or []:
            options += ["--python-path", directory]
        return options

    def check(opts: argparse.Namespace) -> None:
        if opts.threads < 1:
            raise ValueError("--threads must be >= 1")
        if before_bind is not None:
            before_bind(opts)
        opts.device_name = getattr(opts, "device", None) or name.upper()
        if not opts.no_record:
            other = registry.read_record(opts.device_name)
            if other is not None and other["pid"] != os.getpid():
                raise ValueError(f"a {opts.device_name} daemon already runs (pid {other['pid']} at "
                                 f"{other['endpoint']}); stop it first with 'mo-core daemon stop'")

    def setup(server: Server, opts: argparse.Namespace):
        daemon = make_daemon(server, opts)
        daemon.register(server)
        device = opts.device_name
        recorded = False
        if not opts.no_record:
            write_record(device, os.getpid(), server.endpoint, key_file=opts.key_file,
                         log=_stderr_file(), started=daemon.started, options=_relaunch_options(opts))
            recorded = True
            server.still_wanted = partial(_replaced, device)
        say(f"pid {os.getpid()} serving {device} at {server.endpoint} ({opts.threads} threads, version "
            f"{registry.package_version()})")

        def cleanup(reason: str) -> None:
            if recorded:
                registry.remove_record(device, os.getpid())
            daemon.cleanup()
            say(f"pid {os.getpid()} stopped: {reason} ({daemon.requests} inference requests served)")
        return cleanup

    return serve_main(argv, name, setup, add_arguments=arguments, before_bind=check,
                      threads=min(4, os.cpu_count() or 1), parent_pid=0, spin=SPIN_S, timestamps=True,
                      description=description or f"mo-core {name.upper()} inference daemon")
