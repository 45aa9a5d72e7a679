"""The models of a repository served in this process (the embedded backend, and
inside each Ray replica): load, unload, states as Triton's repository index names
them (LOADING, READY, UNAVAILABLE with a reason, UNLOADING), lookups by name and
version with the protocol's errors.

A model that fails to load is UNAVAILABLE with the error as its reason; the others
keep serving. The server is ready once every model asked for at start is READY."""
from __future__ import annotations

import logging
import threading

from core.errors import Error

from .errors import ServingError, bad_request, not_found, unavailable
from .model import ServedModel
from .repository import ModelRepository, UnknownModel, check_name

log = logging.getLogger("mo_core.serve")


class ModelManager:
    def __init__(self, repository: ModelRepository, ie):
        self.repository = repository
        self.ie = ie
        self._lock = threading.RLock()
        self._models: dict[str, dict] = {}  # name -> {version: ServedModel (or a Ray model)}
        self._states: dict[str, dict[int | None, tuple[str, str]]] = {}  # name -> {version: (state, reason)}
        self._load_locks: dict[str, threading.Lock] = {}
        self._expected: set[str] = set()
        self._closed = False

    # ----------------------------------------------------------------- loading
    def load_all(self, names: list[str] | None) -> None:
        """Load the repository's models (or `names`), one after the other; failures
        are logged and left UNAVAILABLE."""
        names = self.repository.names() if names is None else names
        with self._lock:
            self._expected = set(names)
            for name in names:
                self._states.setdefault(name, {})[None] = ("LOADING", "")
        for i, name in enumerate(names, 1):
            log.info("loading model %d of %d: %s", i, len(names), name)
            try:
                self.load(name)
            except ServingError as exc:
                log.error("model %s: %s", name, exc.message)

    def load(self, name: str) -> None:
        """(Re)load a model: the versions its config serves, replacing what was loaded."""
        try:
            check_name(name)
        except Error as exc:
            raise bad_request(str(exc)) from None
        with self._lock:
            if self._closed:
                raise unavailable("the server is shutting down")
            lock = self._load_locks.setdefault(name, threading.Lock())
        with lock:
            try:
                source = self.repository.model(name)
                versions = source.served_versions()
                if not versions:
                    raise Error("model {!r} has no version directories (1/, 2/, ...) in {}", name, source.path)
            except UnknownModel as exc:
                with self._lock:
                    if self._states.get(name, {}).get(None, ("",))[0] == "LOADING":
                        self._states[name][None] = ("UNAVAILABLE", str(exc))
                raise not_found(str(exc)) from None
            except Error as exc:
                self._set_state(name, None, "UNAVAILABLE", str(exc))
                raise bad_request(str(exc)) from None
            try:
                loaded = self._open(source, versions)
            except Error as exc:
                for version in versions:
                    if self._states.get(name, {}).get(version, ("",))[0] == "LOADING":
                        self._set_state(name, version, "UNAVAILABLE", str(exc))
                with self._lock:
                    self._states[name].pop(None, None)
                raise ServingError(f"model '{name}' failed to load: {exc}", 400, "OTHER") from None
            with self._lock:
                if self._closed:  # shut down while this one loaded
                    for model in loaded.values():
                        model.close()
                    raise unavailable("the server is shutting down")
                old = self._models.get(name, {})
                self._models[name] = loaded
                states = self._states.setdefault(name, {})
                states.pop(None, None)
                for version in old:
                    if version not in loaded:
                        states.pop(version, None)
                self._expected.add(name)
        for version, model in old.items():
            model.close()  # after the new versions serve: no gap

    def _open(self, source, versions) -> dict:
        """{version: ServedModel} on this process's daemons (the Ray mode opens them
        as deployments instead: ray_mode.py)."""
        loaded: dict = {}
        try:
            for version in versions:
                self._set_state(source.name, version, "LOADING", "")
                xml, bin_ = self.repository.ir_of(source, version)
                loaded[version] = ServedModel(self.ie, source.name, version, xml, bin_, source.config)
                self._set_state(source.name, version, "READY", "")
        except BaseException:
            for model in loaded.values():
                model.close()
            raise
        return loaded

    def unload(self, name: str) -> None:
        with self._lock:
            models = self._models.pop(name, None)
            if models is None:
                if name in self._states:
                    self._states.pop(name)
                    self._expected.discard(name)
                    return
                raise not_found(f"model '{name}' is not loaded")
            self._expected.discard(name)
            for version in models:
                self._states[name][version] = ("UNLOADING", "")
        for model in models.values():
            model.close()
        with self._lock:
            if name not in self._models:
                self._states[name] = {v: ("UNAVAILABLE", "unloaded") for v in models}

    def _set_state(self, name: str, version, state: str, reason: str) -> None:
        with self._lock:
            self._states.setdefault(name, {})[version] = (state, reason)

    # ----------------------------------------------------------------- lookups
    def ready(self) -> bool:
        with self._lock:
            return all(name in self._models and all(s == "READY" for s, _ in self._states[name].values())
                       for name in self._expected)

    def get(self, name: str, version: str = "") -> ServedModel:
        with self._lock:
            versions = self._models.get(name)
            state = self._states.get(name)
        if not versions:
            if state:
                reason = next((r for _, r in state.values() if r), "")
                raise unavailable(f"model '{name}' is not ready ({', '.join(sorted({s for s, _ in state.values()}))}"
                                  + (f": {reason}" if reason else "") + ")")
            raise not_found(f"unknown model '{name}'; the repository index (/v2/repository/index) lists the models")
        if not version:
            return versions[max(versions)]
        if not version.isdigit() or int(version) not in versions:
            raise not_found(f"model '{name}' has no version '{version}' loaded (loaded: "
                            f"{', '.join(map(str, sorted(versions)))})")
        return versions[int(version)]

    def metadata(self, name: str, version: str = "") -> dict:
        return self.get(name, version).metadata()

    def model_config(self, name: str, version: str = "") -> dict:
        return self.get(name, version).model_config()

    def infer(self, name: str, version: str, inputs: dict, outputs: list | None) -> tuple[str, dict, dict]:
        model = self.get(name, version)
        result, timings = model.infer(inputs, outputs)
        return str(model.version), result, timings

    def model_ready(self, name: str, version: str = "") -> bool:
        try:
            self.get(name, version)
            return True
        except ServingError:
            return False

    def loaded(self) -> list[tuple[str, int]]:
        with self._lock:
            return [(name, v) for name, versions in sorted(self._models.items()) for v in sorted(versions)]

    def index(self, ready_only: bool = False) -> list[dict]:
        """Triton's repository index: every model of the repository with its state."""
        with self._lock:
            states = {name: dict(s) for name, s in self._states.items()}
        try:
            names = set(self.repository.names())
        except Error:
            names = set()
        out = []
        for name in sorted(names | set(states)):
            entries = states.get(name) or {None: ("", "")}  # in the repository, never loaded
            for version, (state, reason) in sorted(entries.items(), key=lambda kv: kv[0] or 0):
                if ready_only and state != "READY":
                    continue
                entry = {"name": name}
                if version is not None:
                    entry["version"] = str(version)
                if state:
                    entry["state"] = state
                if reason:
                    entry["reason"] = reason
                out.append(entry)
        return out

    def close(self) -> None:
        with self._lock:
            self._closed = True
            models = [m for versions in self._models.values() for m in versions.values()]
            self._models = {}
        for model in models:
            model.close()
