"""`mo-core serve --ray ADDRESS`: each model a Ray Serve application whose replicas
each own a device daemon (a private runtime directory on the replica's node,
daemons.py), behind the same REST and gRPC front end as the embedded mode
(embedded.run_frontend, in this process). The only module that imports ray.

* A replica (ModelReplica) loads the model's served versions from the repository
  path - which every node must see at the same path (a shared volume), like
  Triton's - converting a Caffe/TensorFlow model into its node's cache when needed,
  onto its own daemon, and runs requests there (dynamic batching included).
* config.json's "replicas" is num_replicas or autoscaling (min, max,
  target_ongoing_requests), its "resources" the CPUs/GPUs each replica reserves.
* A replica that dies (its node gone) is replaced by Ray Serve; a replica's daemon
  that dies is restarted by the replica's IECore on the next request; requests in
  flight then get a clean 500/503 error. A replica that is killed takes its
  daemon with it (the watchdog), so no daemon is orphaned.
* The front end keeps the statistics and metrics, as in the embedded mode.
"""
from __future__ import annotations

import itertools
import logging
import os

import ray
from ray import serve

from core.errors import Error

from .config import Autoscaling, ModelConfig
from .embedded import ServeOptions, listen, run_frontend, security, setup_logging
from .errors import ServingError
from .manager import ModelManager
from .repository import ModelRepository

log = logging.getLogger("mo_core.serve")
REQUEST_TIMEOUT_S = float(os.environ.get("MO_CORE_SERVE_RAY_TIMEOUT", "120"))


class ModelReplica:
    """One replica of a model: its own daemon(s), its versions loaded there."""

    def __init__(self, repository: str, cache_dir: str, name: str, versions: list, owner: int):
        from device_daemons.client import IECore

        from .daemons import OwnedDaemons
        from .model import ServedModel
        setup_logging()
        node = ray.get_runtime_context().get_node_id()
        # the runtime directory names its server (pid) and node: /tmp/mo-ray-<pid>-<node>-*
        self.daemons = OwnedDaemons(prefix=f"mo-ray-{owner}-{node[:12]}-")
        self.node = node
        self.ie = IECore(policy="auto")
        self.models = {}
        try:
            repo = ModelRepository(repository, cache_dir)
            source = repo.model(name)
            for version in versions:
                xml, bin_ = repo.ir_of(source, version)
                self.models[version] = ServedModel(self.ie, name, version, xml, bin_, source.config)
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
        if getattr(self, "daemons", None) is not None:
            self.daemons.close()
            self.daemons = None

    def __del__(self):  # Ray Serve's graceful replica shutdown
        self.close()


class _App:
    """A Ray Serve application of one model load (its versions share it)."""

    def __init__(self, name: str, handle):
        self.name = name
        self.handle = handle
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                serve.delete(self.name, _blocking=True)
            except Exception as exc:  # noqa: BLE001 - the cluster may be gone at shutdown
                log.warning("could not delete the Ray Serve application %s: %s", self.name, exc)


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


class RayManager(ModelManager):
    """The model manager whose models are Ray Serve applications."""

    def __init__(self, repository: ModelRepository, default_replicas: int, grace: float):
        super().__init__(repository, None)
        self.default_replicas = default_replicas
        self.grace = grace
        self._counter = itertools.count(1)

    def _open(self, source, versions) -> dict:
        for version in versions:
            self._loading(source.name, version)
            self.repository.ir_of(source, version)  # convert here first: errors early, the cache warm
        app_name = f"mo-core-{source.name}-{next(self._counter)}"
        options = deployment_options(source.config, self.default_replicas, self.grace)
        log.info("model %s: deploying %s on Ray Serve (%s)", source.name, app_name,
                 ", ".join(f"{k}={v}" for k, v in options.items() if k in ("num_replicas", "autoscaling_config",
                                                                          "ray_actor_options")))
        deployment = serve.deployment(ModelReplica, name="model", **options)
        try:
            handle = serve.run(deployment.bind(self.repository.path, self.repository.cache_dir, source.name,
                                               list(versions), os.getpid()), name=app_name, route_prefix=None)
        except Exception as exc:  # noqa: BLE001 - Ray's deploy failure, with the replica's error in it
            try:
                serve.delete(app_name)
            except Exception:  # noqa: BLE001
                pass
            raise Error("Ray Serve could not deploy it: {}", str(exc).strip()[-1500:]) from None
        app = _App(app_name, handle)
        described = handle.describe.remote().result(timeout_s=REQUEST_TIMEOUT_S)
        models = {}
        for version in versions:
            metadata, config = described["versions"][version]
            models[version] = RayModel(app, version, metadata, config)
        log.info("model %s: %s running", source.name, app_name)
        return models


def serve_ray(opts: ServeOptions, address: str, default_replicas: int) -> int:
    setup_logging()
    logging.getLogger("ray").setLevel(logging.WARNING)
    token, tls = security(opts)
    repository = ModelRepository(opts.model_repository, opts.cache_dir)
    names = opts.load_models if opts.load_models is not None else repository.names()
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
        manager.close()  # deletes the applications: replicas stop their daemons
        ray.shutdown()
        http_sock.close()
        log.info("stopped")
    return 0
