"""What the REST and the gRPC front ends share: the backend that runs the models
(a ModelManager in this process, or the Ray deployments), statistics and metrics
around every request, the bearer token, the server's metadata.

A backend has: ready(), model_ready(name, version), metadata(name, version),
model_config(name, version), infer(name, version, inputs, outputs) -> (version,
outputs, timings), index(ready_only), load(name), unload(name), loaded() ->
[(name, version)], close()."""
from __future__ import annotations

import hmac
import logging
import os
import time

from core.errors import Error

from .errors import ServingError, bad_request, not_found
from .protocol import InferRequest, InferResponse

log = logging.getLogger("mo_core.serve")
access_log = logging.getLogger("mo_core.serve.access")

EXTENSIONS = ["binary_tensor_data", "model_repository", "statistics"]
MAX_TOKEN_BYTES = 4096


def read_token(path: str) -> bytes:
    """A bearer token from a file only its owner can read (like the daemons' key files)."""
    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            token = f.read(MAX_TOKEN_BYTES + 1).strip()
    except OSError as exc:
        raise Error("cannot read the token file {}: {}", path, exc.strerror) from None
    if st.st_mode & 0o077:
        raise Error("the token file {} is readable by others (mode {:o}); chmod 600 it", path, st.st_mode & 0o777)
    if not token or len(token) > MAX_TOKEN_BYTES or not token.isascii() or b" " in token:
        raise Error("the token file {} must hold one token (printable ASCII, no spaces, at most {} bytes)",
                    path, MAX_TOKEN_BYTES)
    return token


class FixedModels:
    """A backend of models fixed at start, outside any repository: a subclass sets
    `models` ({name: metadata}) and implements infer(). The benchmarks put other
    engines (OpenVINO, an echo model) behind the same front end with it."""

    models: dict = {}

    def ready(self) -> bool:
        return True

    def model_ready(self, name: str, version: str = "") -> bool:
        return name in self.models and version in ("", "1")

    def metadata(self, name: str, version: str = "") -> dict:
        if name not in self.models or version not in ("", "1"):
            raise not_found(f"unknown model '{name}' (version '{version}')")
        return self.models[name]

    def model_config(self, name: str, version: str = "") -> dict:
        return {"name": self.metadata(name, version)["name"], "platform": self.models[name]["platform"]}

    def index(self, ready_only: bool = False) -> list[dict]:
        return [{"name": name, "version": "1", "state": "READY"} for name in self.models]

    def load_all(self, names) -> None:
        pass

    def load(self, name: str) -> None:
        raise bad_request("this server's models are fixed: there is no repository to load from")

    unload = load

    def loaded(self) -> list[tuple[str, int]]:
        return [(name, 1) for name in self.models]


def canonical_version(version: str) -> str:
    """A version as the labels and stats name it: '01' and '1' are version 1 (the routes take both;
    a label per spelling would make series without bound)."""
    return str(int(version)) if version.isdigit() else version


class Server:
    def __init__(self, backend, token: bytes | None = None, access_logging: bool = True, open_metrics: bool = False):
        from importlib.metadata import PackageNotFoundError, version
        from .stats import Statistics
        self.backend = backend
        self.stats = Statistics()
        self.token = token
        self.access_logging = access_logging
        self.open_metrics = open_metrics  # /metrics without the token (a Prometheus scrape carries none)
        try:
            self.version = version("mo-core")
        except PackageNotFoundError:
            self.version = "0+unknown"

    def authorized(self, header: str | bytes | None) -> bool:
        """A request's `Authorization` header against the token (none needed without one)."""
        if self.token is None:
            return True
        if isinstance(header, str):
            header = header.encode("latin-1", "replace")
        scheme, _, credentials = header.strip().partition(b" ") if header else (b"", b"", b"")
        if scheme.lower() != b"bearer":  # (an auth scheme is case-insensitive: RFC 9110 11.1)
            return False
        return hmac.compare_digest(credentials.strip(), self.token)

    def metadata(self) -> dict:
        return {"name": "mo-core", "version": self.version, "extensions": EXTENSIONS}

    def infer(self, request: InferRequest) -> InferResponse:
        t0 = time.perf_counter_ns()
        try:
            version, outputs, timings = self.backend.infer(request.model, request.version, request.inputs,
                                                           request.outputs)
        except ServingError as exc:
            if exc.status != 404:  # (an unknown model gets no metric of its own: no unbounded labels)
                self.stats.failure(request.model, canonical_version(request.version) or self._newest(request.model),
                                   time.perf_counter_ns() - t0, exc.reason)
            raise
        self.stats.success(request.model, version, time.perf_counter_ns() - t0, timings)
        return InferResponse(request.model, version, outputs, request.id)

    def _newest(self, name: str) -> str:
        versions = [str(v) for n, v in self.backend.loaded() if n == name]
        return versions[-1] if versions else ""

    def statistics(self, name: str = "", version: str = "") -> list[dict]:
        """Triton's model_stats of every loaded version, or of one model (version)."""
        loaded = [(n, str(v)) for n, v in self.backend.loaded()]
        if name:
            self.backend.metadata(name, version)  # 404 / 503 for a model or version not loaded
            loaded = [(n, v) for n, v in loaded if n == name and (not version or v == canonical_version(version))]
        return self.stats.report(loaded)

    def log_access(self, peer: str, what: str, status, nbytes: int, t0: float) -> None:
        if self.access_logging:
            access_log.info('%s "%s" %s %dB %.2fms', peer, what, status, nbytes, (time.perf_counter() - t0) * 1e3)
