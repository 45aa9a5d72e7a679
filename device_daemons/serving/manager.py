"""The models of a repository served in this process (the embedded backend, and
inside each Ray replica): load, unload, states as Triton's repository index names
them (LOADING, READY, UNAVAILABLE with a reason, UNLOADING), lookups by name and
version with the protocol's errors.

A model that fails to load is UNAVAILABLE with the error as its reason; the others
keep serving. A reload that fails leaves the versions that were serving serving (and
READY), as Triton does. Loads and unloads of one model run one at a time, in the
order they came: the last one wins. The server is ready once every model asked for
at start (or loaded since) serves."""
from __future__ import annotations

import logging
import threading

from core.errors import Error
from ir import IRError

from .errors import ServingError, bad_request, not_found, unavailable
from .model import ServedModel
from .repository import ModelRepository, UnknownModel, check_name

log = logging.getLogger("mo_core.serve")
# what a model that cannot be loaded raises (a bad config, repository layout, model or IR)
LOAD_ERRORS = (Error, IRError)


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
                self._still_loading_failed(name, exc.message)  # (a bad name never got further)
            except Exception as exc:  # noqa: BLE001 - a bug: this model is unavailable, the others still load
                log.exception("model %s: internal error while loading", name)
                self._still_loading_failed(name, f"internal error: {type(exc).__name__}: {exc}")

    def load(self, name: str) -> None:
        """(Re)load a model: the versions its config serves, replacing what was loaded."""
        try:
            check_name(name)
        except Error as exc:
            raise bad_request(str(exc)) from None
        with self._model_lock(name):
            with self._lock:
                live = set(self._models.get(name, ()))  # versions serving now: they keep serving if this fails
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
            except LOAD_ERRORS as exc:
                if not live:
                    self._set_state(name, None, "UNAVAILABLE", str(exc))
                raise bad_request(str(exc)) from None
            try:
                loaded = self._open(source, versions)
            except LOAD_ERRORS as exc:
                self._open_failed(name, versions, live, str(exc))
                raise ServingError(f"model '{name}' failed to load: {exc}", 400, "OTHER") from None
            except BaseException as exc:  # a bug: no version is left LOADING for ever
                self._open_failed(name, versions, live, f"internal error: {type(exc).__name__}: {exc}")
                raise
            with self._lock:
                if self._closed:  # shut down while this one loaded
                    for model in loaded.values():
                        model.close()
                    raise unavailable("the server is shutting down")
                old = self._models.get(name, {})
                self._models[name] = loaded
                self._states[name] = {version: ("READY", "") for version in loaded}
                self._expected.add(name)
        for version, model in old.items():
            model.close()  # after the new versions serve: no gap

    def _open_failed(self, name: str, versions, live: set, reason: str) -> None:
        """The versions that did not serve are UNAVAILABLE with `reason`; those that did keep serving."""
        with self._lock:
            states = self._states.setdefault(name, {})
            for version in versions:
                if version not in live:
                    states[version] = ("UNAVAILABLE", reason)
            states.pop(None, None)
        if live:
            log.warning("model %s: the reload failed, version(s) %s keep serving: %s", name,
                        ", ".join(map(str, sorted(live))), reason)

    def _still_loading_failed(self, name: str, reason: str) -> None:
        """A model of load_all whose load failed before its versions had states: UNAVAILABLE."""
        with self._lock:
            states = self._states.get(name, {})
            if states.get(None, ("",))[0] == "LOADING":
                states[None] = ("UNAVAILABLE", reason)

    def _model_lock(self, name: str) -> threading.Lock:
        """The lock that runs one model's loads and unloads one at a time."""
        with self._lock:
            if self._closed:
                raise unavailable("the server is shutting down")
            return self._load_locks.setdefault(name, threading.Lock())

    def _loading(self, name: str, version: int) -> None:
        """A version is being loaded: LOADING, unless it serves now (a reload: it keeps
        serving until the new one replaces it, READY)."""
        with self._lock:
            if version not in self._models.get(name, {}):
                states = self._states.setdefault(name, {})
                states[version] = ("LOADING", "")
                states.pop(None, None)  # (load_all's entry for the model: now its versions say it)

    def _open(self, source, versions) -> dict:
        """{version: ServedModel} on this process's daemons (the Ray mode opens them
        as deployments instead: ray_mode.py). States: set by _loading, then READY
        once all are loaded (load())."""
        loaded: dict = {}
        try:
            for version in versions:
                self._loading(source.name, version)
                xml, bin_ = self.repository.ir_of(source, version)
                loaded[version] = ServedModel(self.ie, source.name, version, xml, bin_, source.config)
        except BaseException:
            for model in loaded.values():
                model.close()
            raise
        return loaded

    def unload(self, name: str) -> None:
        """Unload a model; after a load of it that is under way (the last one wins)."""
        with self._model_lock(name):
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
            return all(name in self._models for name in self._expected)

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
        """A version's metadata; without a version the newest's, listing every version
        that serves (Triton: those a request may name)."""
        doc = self.get(name, version).metadata()
        if not version:
            with self._lock:
                doc = dict(doc, versions=[str(v) for v in sorted(self._models.get(name, ()))] or doc["versions"])
        return doc

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
