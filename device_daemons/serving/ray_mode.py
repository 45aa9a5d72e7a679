"""`mo-core serve --ray ADDRESS`: each model a Ray Serve application whose replicas
each own a device daemon (a private runtime directory on the replica's node,
daemons.py), behind the same REST and gRPC front end as the embedded mode
(embedded.run_frontend, in this process). The only module that imports ray.

* A load resolves each served version's IR in the server (converting a Caffe /
  TensorFlow model into the cache) and hands the replicas those paths, a digest of
  their bytes and the config read then: every replica of one load - those Ray Serve
  starts later too - serves that model, never files changed since (a replica whose
  node does not share the cache converts there from the repository path, which
  every node must see at the same path, a shared volume, like Triton's).
* Application names carry this server's pid and a random id: several servers share
  one cluster's Ray Serve without replacing or deleting each other's applications.
* config.json's "replicas" is num_replicas or autoscaling (min, max,
  target_ongoing_requests), its "resources" the CPUs/GPUs each replica reserves.
  A load waits a bounded time for its replicas (placement, start); then, or when
  they fail, it is a load error naming the resources asked and free, or the
  replicas' own error.
* A replica that dies (its node gone) is replaced by Ray Serve; a replica's daemon
  that dies is restarted by the replica's IECore on the next request; requests in
  flight then get a clean 500/503 error. A replica that is killed takes its
  daemon with it (the watchdog), so no daemon is orphaned.
* The front end keeps the statistics and metrics, as in the embedded mode. At the
  end the server deletes its applications, and stops Ray Serve if none is left.
"""
from __future__ import annotations

import hashlib
import itertools
import logging
import os
import secrets
import socket
import threading
import time

import ray
from ray import serve
from ray.serve.api import _run as _serve_run  # serve.run that does not wait for the replicas: ours is bounded

from core.errors import Error

from .config import Autoscaling, ModelConfig
from .embedded import ServeOptions, listen, run_frontend, security, setup_logging
from .errors import ServingError, unavailable
from .manager import LOAD_ERRORS, ModelManager
from .repository import ModelRepository, ModelSource

log = logging.getLogger("mo_core.serve")
REQUEST_TIMEOUT_S = float(os.environ.get("MO_CORE_SERVE_RAY_TIMEOUT", "120"))
# how long a load waits for the cluster to place replicas it has no room for now (an autoscaling
# cluster: the time a node takes to join); Ray Serve alone would wait forever
PLACEMENT_TIMEOUT_S = float(os.environ.get("MO_CORE_SERVE_RAY_PLACEMENT_TIMEOUT", "60"))
# how long placed replicas may take to start (a replica may convert a model on its node)
DEPLOY_TIMEOUT_S = float(os.environ.get("MO_CORE_SERVE_RAY_DEPLOY_TIMEOUT", "1800"))
CONNECT_TIMEOUT_S = 10.0
RESOURCES = (("CPU", "num_cpus"), ("GPU", "num_gpus"))
WHAT_TO_DO = ('give config.json "resources" smaller num_cpus / num_gpus (a fraction such as 0.25 is fine), '
              'fewer "replicas" (or --replicas), unload other models, or add nodes to the cluster; '
              'MO_CORE_SERVE_RAY_PLACEMENT_TIMEOUT is how long a load waits for them')


class ReplicaError(Exception):
    """A replica's load error. Ray Serve reports the constructor's traceback as text,
    whose last line is `...ReplicaError: <message>`: the server finds it there."""


def ir_digest(xml: str, bin_: str) -> str:
    """sha256 of an IR's two files."""
    h = hashlib.sha256()
    for path in (xml, bin_):
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def loaded_ir(source: ModelSource, version: int, ir: tuple, cache_dir: str) -> tuple[str, str]:
    """(xml, bin) of the IR the server resolved when it loaded the model, checked to be
    the same bytes: a replica Ray Serve starts later (a crashed one replaced, a scale-up)
    serves what was loaded, never files changed since."""
    xml, bin_, digest = ir
    if not (os.path.isfile(xml) and os.path.isfile(bin_)):  # converted into a cache this node does not share
        xml, bin_ = ModelRepository(os.path.dirname(source.path), cache_dir).ir_of(source, version)
    if ir_digest(xml, bin_) != digest:
        raise Error("model {} version {}: its files changed since the model was loaded ({} is not the IR loaded "
                    "then), so this replica would serve another model than the others; load the model again "
                    "(POST /v2/repository/models/{}/load) to serve the new files", source.name, version, xml,
                    source.name)
    return xml, bin_


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ServingError):
        return exc.message
    if isinstance(exc, LOAD_ERRORS):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class ModelReplica:
    """One replica of a model: its own daemon(s), its versions loaded there."""

    def __init__(self, source: ModelSource, irs: dict, cache_dir: str, owner: int):
        from core.microkernel.heap import keep_freed_buffers
        from device_daemons.client import IECore

        from .daemons import OwnedDaemons
        from .model import ServedModel
        setup_logging()
        keep_freed_buffers()  # (the replica's process receives each request's tensors)
        self.daemons = self.ie = None
        self.models = {}
        self.node = ray.get_runtime_context().get_node_id()
        try:
            # the runtime directory names its server (pid) and node: /tmp/mo-ray-<pid>-<node>-*
            self.daemons = OwnedDaemons(prefix=f"mo-ray-{owner}-{self.node[:12]}-")
            self.ie = IECore(policy="auto")
            for version, ir in irs.items():  # what the server loaded: its IR and config, not the files now
                xml, bin_ = loaded_ir(source, version, ir, cache_dir)
                self.models[version] = ServedModel(self.ie, source.name, version, xml, bin_, source.config)
        except Exception as exc:  # noqa: BLE001 - the server shows the message as the model's load error
            self.close()
            raise ReplicaError(_reason(exc)) from None
        except BaseException:
            self.close()
            raise

    def describe(self) -> dict:
        """{version: (metadata, config)} and where this replica runs."""
        return {"versions": {v: (m.metadata(), m.model_config()) for v, m in self.models.items()},
                "node": self.node, "pid": os.getpid(), "runtime_dir": self.daemons.runtime_dir}

    def infer(self, version: int, inputs: dict, outputs):
        """("ok", outputs, timings) or ("error", message, status, reason): errors are
        data here, not exceptions Ray would wrap."""
        try:
            return ("ok",) + self.models[version].infer(inputs, outputs)
        except ServingError as exc:
            return ("error", exc.message, exc.status, exc.reason)

    def close(self) -> None:
        for model in getattr(self, "models", {}).values():
            model.close()
        self.models = {}
        if getattr(self, "ie", None) is not None:
            self.ie.close()
            self.ie = None
        if getattr(self, "daemons", None) is not None:
            self.daemons.close()
            self.daemons = None

    def __del__(self):  # Ray Serve's graceful replica shutdown
        self.close()


class _App:
    """A Ray Serve application of one model load (its versions share it)."""

    def __init__(self, name: str, handle, delete):
        self.name = name
        self.handle = handle
        self._delete = delete
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._delete(self.name)


class RayModel:
    """A model version served by a Ray Serve application: what the manager and the
    front end call, as a ServedModel's."""

    def __init__(self, app: _App, version: int, metadata: dict, config: dict):
        self.app = app
        self.version = version
        self._metadata = metadata
        self._config = config

    def metadata(self) -> dict:
        return self._metadata

    def model_config(self) -> dict:
        return self._config

    def infer(self, inputs: dict, outputs=None):
        try:
            reply = self.app.handle.infer.remote(self.version, inputs, outputs).result(timeout_s=REQUEST_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a replica or node that died, a timeout: Ray's errors
            raise ServingError(f"model '{self._metadata['name']}': the replica failed ({type(exc).__name__}: "
                               f"{str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}); "
                               f"retry: Ray Serve replaces it", 503, "OTHER") from None
        if reply[0] == "error":
            raise ServingError(reply[1], reply[2], reply[3])
        return reply[1], reply[2]

    def close(self) -> None:
        self.app.close()


def deployment_options(config: ModelConfig, default_replicas: int, grace: float) -> dict:
    options = {"ray_actor_options": {"num_cpus": config.num_cpus, "num_gpus": config.num_gpus},
               "max_ongoing_requests": max(8, 2 * config.max_batch_size), "health_check_period_s": 2.0,
               "graceful_shutdown_timeout_s": grace, "max_constructor_retry_count": 3}
    replicas = config.replicas if "replicas" in config.raw else default_replicas
    if isinstance(replicas, Autoscaling):
        options["autoscaling_config"] = {"min_replicas": replicas.min, "max_replicas": replicas.max,
                                         "target_ongoing_requests": replicas.target_ongoing_requests}
    else:
        options["num_replicas"] = replicas
    return options


# ----------------------------------------------------------------- placement
def _asks(options: dict) -> tuple[dict, int]:
    """({"CPU": n, "GPU": n} one replica reserves, how many replicas the deployment starts with)."""
    actor = options["ray_actor_options"]
    per_replica = {key: float(actor.get(option) or 0) for key, option in RESOURCES}
    count = options.get("num_replicas", options.get("autoscaling_config", {}).get("min_replicas", 1))
    return per_replica, count


def _amounts(resources: dict, zero_cpu: bool = True) -> str:
    """"2 CPU, 1 GPU" (a GPU only where there is one; a CPU count of 0 unless `zero_cpu` is false)."""
    shown = [f"{resources.get(k, 0):g} {k}" for k in ("CPU", "GPU")
             if resources.get(k, 0) or (k == "CPU" and zero_cpu)]
    return ", ".join(shown) or "nothing"


def _fits(asks: dict, have: dict, times: int = 1) -> bool:
    return all(have.get(k, 0) + 1e-6 >= v * times for k, v in asks.items() if v)


def placement_problem(options: dict) -> str | None:
    """Why the cluster cannot place the deployment's replicas now (asked vs available),
    or None. A replica is one actor: it needs a node with that much."""
    asks, count = _asks(options)
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    listed = "; ".join(_amounts(n) for n in nodes) or "none alive"
    each = "its replica needs" if count == 1 else f"each of its {count} replicas needs"
    if not any(_fits(asks, n) for n in nodes):
        return f"{each} {_amounts(asks, False)} and no node of the Ray cluster has that much (its nodes: {listed})"
    free = ray.available_resources()
    if not _fits(asks, free, count):
        total = {k: v * count for k, v in asks.items()}
        need = (f"its replica needs {_amounts(asks, False)}" if count == 1 else
                f"its {count} replicas need {_amounts(total, False)} in all ({_amounts(asks, False)} each)")
        return (f"{need} and the Ray cluster has {_amounts(free)} free (its nodes: {listed}; running replicas "
                f"hold the rest)")
    return None


def _replica_error(status) -> str:
    """The replicas' own load error from the application's status (Ray Serve's own
    message says only "Failed to update the deployments ['model']")."""
    text = "\n".join(d.message for d in status.deployments.values() if d.message)
    marker = f"{ReplicaError.__name__}: "
    if marker in text:
        return text[text.rindex(marker) + len(marker):].strip()[:2000]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else status.message or str(status.status))[:2000]


class RayManager(ModelManager):
    """The model manager whose models are Ray Serve applications."""

    def __init__(self, repository: ModelRepository, default_replicas: int, grace: float):
        super().__init__(repository, None)
        self.default_replicas = default_replicas
        self.grace = grace
        # application names of this server alone: several servers share the cluster's Ray Serve
        self.server_id = f"{os.getpid()}-{secrets.token_hex(3)}"
        self._counter = itertools.count(1)
        self._apps_lock = threading.Lock()
        self._apps: set[str] = set()  # this server's applications not deleted yet (deploying ones too)
        self._serve_lock = threading.RLock()

    def _serve(self, call, *args, **kwargs):
        """A Ray Serve API call, one at a time in this server: Ray Serve registers and unregisters modules with
        cloudpickle while it builds a deployment's config, which is not thread-safe - two loads at once, or a load
        beside another's status poll, failed with "... is not registered for pickle by value"."""
        with self._serve_lock:
            return call(*args, **kwargs)

    def _open(self, source, versions) -> dict:
        irs = {}
        for version in versions:
            self._loading(source.name, version)
            xml, bin_ = self.repository.ir_of(source, version)  # convert here first: errors early, the cache warm
            irs[version] = (xml, bin_, ir_digest(xml, bin_))  # every replica serves exactly this
        app_name = f"mo-core-{source.name}-{self.server_id}-{next(self._counter)}"
        options = deployment_options(source.config, self.default_replicas, self.grace)
        log.info("model %s: deploying %s on Ray Serve (%s)", source.name, app_name,
                 ", ".join(f"{k}={v}" for k, v in options.items() if k in ("num_replicas", "autoscaling_config",
                                                                          "ray_actor_options")))
        problem = placement_problem(options)
        if problem:
            log.warning("model %s: %s: waiting up to %g s for room (MO_CORE_SERVE_RAY_PLACEMENT_TIMEOUT)",
                        source.name, problem, PLACEMENT_TIMEOUT_S)
        handle = self._deploy(app_name, options, (source, irs, self.repository.cache_dir, os.getpid()))
        try:
            self._wait_running(app_name, options, problem is not None)
            described = self._describe(handle)
        except BaseException:
            self._delete(app_name, wait=False)  # (a replica never placed takes the grace period to go)
            raise
        app = _App(app_name, handle, self._delete)
        models = {}
        for version in versions:
            metadata, config = described["versions"][version]
            models[version] = RayModel(app, version, metadata, config)
        log.info("model %s: %s running", source.name, app_name)
        return models

    def _deploy(self, app_name: str, options: dict, args: tuple):
        """Start the application of ModelReplica(*args); it counts as this server's from
        now on (close() deletes it even while it deploys). One at a time: Ray Serve's
        deployment building is not thread-safe (_serve)."""
        with self._apps_lock:
            if self._closed:
                raise unavailable("the server is shutting down")
            self._apps.add(app_name)
            try:
                return self._serve(lambda: _serve_run(serve.deployment(ModelReplica, name="model", **options).bind(
                    *args), _blocking=False, name=app_name, route_prefix=None))
            except Exception as exc:  # noqa: BLE001 - Ray's errors
                error = exc
        self._delete(app_name)
        raise Error("Ray Serve could not deploy it ({}): {}", app_name, str(error).strip()[-1500:])

    def _wait_running(self, app_name: str, options: dict, no_room: bool) -> None:
        """Until the application runs; a load error when its replicas fail, cannot be
        placed (bounded: Ray Serve itself would wait forever) or do not start."""
        start = time.monotonic()
        while True:
            if self._closed:
                raise unavailable("the server is shutting down")
            status = self._serve(serve.status).applications.get(app_name)
            waited = time.monotonic() - start
            if status is None:
                raise Error("its Ray Serve application {} is gone (deleted by another client of the cluster?); "
                            "load the model again", app_name)
            if status.status == "RUNNING":
                return
            failed = any(f"{ReplicaError.__name__}: " in d.message for d in status.deployments.values())
            if failed or status.status in ("DEPLOY_FAILED", "UNHEALTHY"):  # (a replica's load error: as the
                raise Error("{}", _replica_error(status))  # embedded mode, not after Ray Serve's retries)
            unscheduled = any("to be scheduled" in d.message for d in status.deployments.values())
            if waited > PLACEMENT_TIMEOUT_S and (no_room or unscheduled):
                raise Error("its replicas were not placed in {:.0f} s: {}; {}", waited,
                            placement_problem(options) or "they waited for the cluster's resources",
                            WHAT_TO_DO)
            if waited > DEPLOY_TIMEOUT_S:
                raise Error("its replicas did not start in {:.0f} s (MO_CORE_SERVE_RAY_DEPLOY_TIMEOUT); Ray Serve "
                            "says: {}", waited, _replica_error(status))
            time.sleep(0.25)

    @staticmethod
    def _describe(handle) -> dict:
        try:
            return handle.describe.remote().result(timeout_s=REQUEST_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a replica gone just after it started
            raise Error("its replica did not answer ({}: {})", type(exc).__name__,
                        (str(exc).strip().splitlines() or [""])[-1][:300]) from None

    def _delete(self, app_name: str, wait: bool = True) -> None:
        """Delete an application; one not waited for stays listed, for close() to wait."""
        with self._apps_lock:
            if app_name not in self._apps:
                return  # deleted already (a load that failed while the server closed)
        try:
            self._serve(serve.delete, app_name, _blocking=False)
            deadline = time.monotonic() + self.grace + 30  # (as _delete_all)
            while wait and app_name in self._serve(serve.status).applications and time.monotonic() < deadline:
                time.sleep(0.2)
        except Exception as exc:  # noqa: BLE001 - the cluster may be gone at shutdown
            log.warning("could not delete the Ray Serve application %s: %s", app_name, exc)
        if wait:
            with self._apps_lock:
                self._apps.discard(app_name)

    def close(self) -> None:
        with self._lock:
            self._closed = True  # no application starts from now on (_deploy)
        self._delete_all()
        super().close()  # the models (their applications are gone already)
        self._shutdown_serve()

    def _delete_all(self) -> None:
        """Delete every application of this server (loads under way too) at once: Ray
        Serve takes some 3 s for a deletion, one after the other made a stop slow."""
        with self._apps_lock:
            names = set(self._apps)
        for app_name in names:
            try:
                self._serve(serve.delete, app_name, _blocking=False)
            except Exception as exc:  # noqa: BLE001 - the cluster may be gone at shutdown
                log.warning("could not delete the Ray Serve application %s: %s", app_name, exc)
        deadline = time.monotonic() + self.grace + 30  # (replicas get the grace period to finish)
        left = names
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            try:
                left = names & set(self._serve(serve.status).applications)
            except Exception:  # noqa: BLE001 - the cluster may be gone at shutdown
                break
        if left:
            log.warning("Ray Serve did not delete the application(s) %s in time", ", ".join(sorted(left)))
        with self._apps_lock:
            self._apps -= names

    def _shutdown_serve(self) -> None:
        """Stop Ray Serve (its controller) when no application is left on the cluster:
        another server's or client's keep it running."""
        try:
            if not self._serve(serve.status).applications:
                self._serve(serve.shutdown)
        except Exception as exc:  # noqa: BLE001 - the cluster may be gone at shutdown
            log.warning("could not stop Ray Serve on the cluster: %s", exc)


# ----------------------------------------------------------------- the server
def _bootstrap_address(address: str) -> tuple[str, int] | None:
    """(host, port) that `ray.init(address)` connects to first, where it can be told."""
    if address == "auto":
        try:  # (Ray's own lookup: RAY_ADDRESS, then the cluster `ray start` ran last)
            from ray._private.services import canonicalize_bootstrap_address
            address = canonicalize_bootstrap_address(address) or ""
        except Exception:  # noqa: BLE001 - none there: ray.init says so itself
            return None
    host, _, port = address.split("://")[-1].rpartition(":")
    return (host.strip("[]"), int(port)) if host and port.isdigit() else None


def check_reachable(address: str) -> None:
    """A clear error, within seconds, where nothing answers at the cluster's address:
    ray.init would retry there for about 12 minutes, saying nothing useful."""
    target = _bootstrap_address(address)
    if target is None:
        return
    try:
        socket.create_connection(target, timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise Error("cannot connect to the Ray cluster at {}: nothing answers at {}:{} ({}); start one there with "
                    "`ray start --head`, or give its head node's address (HOST:PORT, the GCS port: 6379 unless "
                    "`ray start --port` said otherwise)", address, target[0], target[1],
                    exc.strerror or str(exc) or type(exc).__name__) from None


def serve_ray(opts: ServeOptions, address: str, default_replicas: int) -> int:
    setup_logging()
    logging.getLogger("ray").setLevel(logging.WARNING)
    token, tls = security(opts)
    repository = ModelRepository(opts.model_repository, opts.cache_dir)
    names = opts.load_models if opts.load_models is not None else repository.names()
    check_reachable(address)
    http_sock = listen(opts.host, opts.http_port)
    try:
        ray.init(address=address, namespace="mo-core-serve", log_to_driver=False, logging_level=logging.WARNING)
    except Exception as exc:  # noqa: BLE001 - no cluster there
        http_sock.close()
        raise Error("cannot connect to the Ray cluster at {}: {} (start one with `ray start --head`)", address,
                    str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__) from None
    manager = RayManager(repository, default_replicas, opts.grace)
    try:
        serve.start(proxy_location="Disabled")  # this process is the front end: no Ray HTTP proxy
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        run_frontend(opts, manager, names, token, tls, http_sock,
                     f"Ray cluster {address} ({len(nodes)} node{'s' if len(nodes) != 1 else ''})")
    finally:
        manager.close()  # deletes the applications (replicas stop their daemons), then Ray Serve if unused
        ray.shutdown()
        http_sock.close()
        log.info("stopped")
    return 0
