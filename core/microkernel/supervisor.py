"""Supervised worker processes: the short-lived policy over the launcher.

A WorkerProcess runs `<python> -m <module> --endpoint EP --parent-pid <our pid>` (a
module whose __main__ uses server.serve_main) through launcher.launch. Its
stdout/stderr go to a private log (launcher.PrivateLog: a file without a name,
never left behind) so that when it dies - a Python traceback at import, a C++
CHECK failure, a segfault - the last lines can be put into the error message.

The policy, in one place:
* start: the `hello` handshake is awaited while watching the process, so a worker
  that dies at import is reported at once with its stderr, not after a timeout;
* call: while waiting for the reply the process is watched too: death ->
  WorkerError naming the exit status / signal and the stderr tail; no reply in
  time -> MicrokernelTimeout and the (hung) process is killed;
* the next call restarts a dead worker while the restart budget lasts
  (launcher.RestartBudget), then every call raises "gave up after N restarts";
* stop: `shutdown` request, then SIGTERM after a grace period, then SIGKILL, and
  always waitpid (launcher.stop: no zombies). A weakref finalizer (run at exit
  too) kills a worker whose WorkerProcess was forgotten; the worker's own
  parent-pid watch covers the case where the core dies without running any
  finalizer (SIGKILL).
"""
from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, Sequence

import numpy as np

from .auth import load_key_file
from .client import Client
from .errors import MicrokernelError, MicrokernelTimeout, ServiceGone, WorkerError
from .launcher import (Launched, ProcessSpec, RestartBudget, StartFailure, handshake, launch,
                       stop as stop_process)

__all__ = ["WorkerProcess"]


class _Instance:
    """One running incarnation of a worker: process and clients (its main socket's and,
    when its hello names one, its local carrier's)."""

    def __init__(self, proc: Launched, client: Client):
        self.proc = proc
        self.client = client
        self.local: Client | None = None
        self.endpoint = proc.endpoint
        self.failure: str | None = None  # why it is considered dead

    def open_carrier(self, info: dict, timeout: float, key: bytes | None) -> None:
        """A worker is ours, on this machine: its local carrier (direct.py) too, with
        its main socket as the ZeroMQ fallback."""
        direct = info.get("direct") if isinstance(info.get("direct"), dict) else {}
        path = direct.get("path")
        if isinstance(path, str):
            self.local = Client(self.endpoint, timeout=timeout, key=key, direct_path=path)

    def client_for(self, lane: str) -> Client:
        return self.local if lane == "local" and self.local is not None else self.client

    def close_clients(self) -> None:
        self.client.close()
        if self.local is not None:
            self.local.close()

    def cleanup(self) -> None:
        """Kill (if needed) and reap the process; remove its socket, drop its log."""
        self.close_clients()
        self.proc.cleanup()


def _finalize(holder: dict) -> None:
    """Finalizer (GC or interpreter exit): never leave a worker behind."""
    inst = holder.pop("instance", None)
    if inst is not None:
        inst.cleanup()


class WorkerProcess:
    """A supervised worker process speaking the microkernel protocol.

    `WorkerProcess(module, name=..., interpreter=sys.executable, endpoint=None,
    args=(), env=None, startup_timeout=30, request_timeout=60, restart_budget=3,
    key_file=None, threads=None, sandbox=None, restart_window=None)`: sandbox, the
    OS sandbox it runs in (sandbox.Sandbox); restart_window, seconds over which
    restart_budget counts (None: over its whole life). `start()` (or `with WorkerProcess(...) as w:`)
    spawns it; `call(op, args, arrays, timeout)` starts it on demand. Thread-safe.
    `interpreter` may be another Python (see launcher).
    """

    def __init__(self, module: str, *, name: str, interpreter: str | None = None,
                 endpoint: str | None = None, args: Sequence[str] = (),
                 env: dict[str, str] | None = None, startup_timeout: float = 30.0,
                 request_timeout: float = 60.0, restart_budget: int = 3,
                 key_file: str | None = None, threads: int | None = None, sandbox=None,
                 restart_window: float | None = None) -> None:
        self.module = module
        self.name = name
        self.interpreter = interpreter or sys.executable
        self.endpoint_hint = endpoint
        self.args = list(args) + (["--threads", str(threads)] if threads is not None else [])
        self.env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.request_timeout = request_timeout
        self.key_file = key_file
        self.sandbox = sandbox  # a launcher.ProcessSpec's: the OS sandbox it runs in (core/microkernel/sandbox.py)
        self._key = load_key_file(key_file) if key_file else None
        self._budget = RestartBudget(restart_budget, restart_window)
        self.service_info: dict = {}
        self._started_once = False
        self._last_failure: str | None = None
        self._stopped = False
        self._lock = threading.RLock()
        # The finalizer must not reference self: it shares this holder instead.
        self._holder: dict[str, Any] = {}
        self._finalizer = weakref.finalize(self, _finalize, self._holder)

    # ----------------------------------------------------------------- properties
    @property
    def restarts(self) -> int:
        return self._budget.used

    @property
    def restart_budget(self) -> int:
        return self._budget.limit

    @property
    def _inst(self) -> _Instance | None:
        return self._holder.get("instance")

    @property
    def pid(self) -> int | None:
        inst = self._inst
        return inst.proc.pid if inst else None

    @property
    def endpoint(self) -> str | None:
        inst = self._inst
        return inst.endpoint if inst else None

    def stderr_tail(self, max_lines: int = 30) -> str:
        """The last lines the running (or last) incarnation wrote to stdout/stderr."""
        inst = self._inst
        return inst.proc.log_tail(max_lines) if inst else ""

    def alive(self) -> bool:
        inst = self._inst
        return inst is not None and inst.failure is None and inst.proc.alive()

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> "WorkerProcess":
        """Spawn the worker and complete the handshake (no-op when it runs)."""
        with self._lock:
            self._stopped = False
            if self.alive():
                return self
            if self._inst is not None:  # dead instance: this start is a restart
                self._restart_or_give_up()
            else:
                self._spawn()
            return self

    def _restart_or_give_up(self) -> None:
        self._budget.spend(self.name, self._last_failure)
        self._discard_instance()
        self._spawn()

    def _discard_instance(self) -> None:
        inst = self._holder.pop("instance", None)
        if inst is not None:
            inst.cleanup()

    def _spawn(self) -> None:
        spec = ProcessSpec(self.module, self.name, interpreter=self.interpreter, args=self.args,
                           env=self.env, endpoint=self.endpoint_hint, key_file=self.key_file, sandbox=self.sandbox)
        try:
            proc = launch(spec, have_key=self._key is not None)
        except WorkerError as exc:
            self._last_failure = str(exc)
            raise
        inst = _Instance(proc, Client(proc.endpoint, timeout=self.request_timeout, key=self._key))
        self._holder["instance"] = inst
        self._started_once = True
        try:
            self.service_info = handshake(inst.client, proc, self.startup_timeout)
            inst.open_carrier(self.service_info, self.request_timeout, self._key)
        except StartFailure as exc:
            raise self._start_failed(inst, exc) from None
        except MicrokernelError as exc:  # e.g. a reply this side cannot read
            inst.failure = f"bad handshake: {exc}"
            self._last_failure = inst.failure
            inst.cleanup()
            raise WorkerError(f"worker '{self.name}' failed the handshake: {exc}") from None

    def _start_failed(self, inst: _Instance, exc: StartFailure) -> MicrokernelError:
        if exc.reason == "exited":
            return self._died(inst, "while starting")
        if exc.reason == "timeout":
            return self._hung(inst, "hello", self.startup_timeout, "did not start")
        inst.failure = f"bad handshake: {exc}"
        self._last_failure = inst.failure
        inst.cleanup()
        return WorkerError(f"worker '{self.name}' failed the handshake: {exc}")

    def _died(self, inst: _Instance, when: str) -> WorkerError:
        """Record the death of `inst` and build the error that reports it."""
        inst.proc.wait_gone(5.0)  # reap
        status = inst.proc.exit_status()
        tail = inst.proc.log_tail()
        inst.failure = f"{status} {when}"
        self._last_failure = inst.failure
        msg = f"worker '{self.name}' (pid {inst.proc.pid}) {status} {when}"
        if tail:
            msg += f"; its last stderr lines:\n{tail}"
        else:
            msg += " (it wrote nothing to stderr)"
        inst.close_clients()
        return WorkerError(msg, exit_status=status, stderr_tail=tail)

    def _hung(self, inst: _Instance, op: str, timeout: float, what: str) -> MicrokernelTimeout:
        """Kill a worker that did not answer in time and build the error."""
        inst.failure = f"{what} within {timeout:g} s"
        self._last_failure = inst.failure
        inst.close_clients()
        inst.proc.terminate(0.5)
        tail = inst.proc.log_tail(10)
        msg = (f"worker '{self.name}' (pid {inst.proc.pid}) {what} within {timeout:g} s "
               f"('{op}'); it was killed")
        if self._budget.left:
            msg += " and will be restarted on the next call"
        if tail:
            msg += f"; its last stderr lines:\n{tail}"
        return MicrokernelTimeout(msg)

    # ----------------------------------------------------------------- requests
    def _running_instance(self) -> _Instance:
        with self._lock:
            if self._stopped and self._inst is None:
                raise WorkerError(f"worker '{self.name}' was stopped")
            inst = self._inst
            if inst is None:
                if self._started_once:
                    self._restart_or_give_up()
                else:
                    self._spawn()
            elif inst.failure is not None or not inst.proc.alive():
                if inst.failure is None:  # died while idle
                    self._died(inst, "while idle")
                self._restart_or_give_up()
            inst = self._inst
            assert inst is not None
            return inst

    def call(self, op: str, args: dict | None = None,
             arrays: Sequence[np.ndarray] | None = None,
             timeout: float | None = None, *, direct: bool = False, spin: float = 0.0,
             lane: str = "main") -> tuple[dict, list]:
        """Call a verb of the worker: (result, arrays). Raises RemoteError for an
        error reply, WorkerError when the worker dies (or cannot be restarted),
        MicrokernelTimeout when it hangs (it is killed; the next call restarts it).
        direct=True sends and receives on the calling thread (Client.call's
        direct mode, polling `spin` s first): for short requests in a loop.
        lane="local": a direct call goes over the worker's local carrier (Server.handle's
        lane="local": the connection's own thread receives, computes and replies), over
        its main socket when the message does not fit a datagram, the carrier refused
        the connection or the worker has none (register such verbs on both lanes)."""
        inst = self._running_instance()
        t = self.request_timeout if timeout is None else timeout
        client = inst.client_for(lane)
        try:
            if direct:
                return client.call(op, args, arrays, t, watch=_FailureAware(inst), direct=True, spin=spin)
            pending = client.call_async(op, args, arrays)
        except (ServiceGone, MicrokernelTimeout) as exc:
            raise self._failed_call(inst, op, t, exc) from None
        except MicrokernelError:
            if inst.failure is not None:  # closed by a concurrent failure
                raise WorkerError(f"worker '{self.name}' failed: {inst.failure}") from None
            raise
        try:
            return pending.result(t, watch=_FailureAware(inst))
        except (ServiceGone, MicrokernelTimeout) as exc:
            raise self._failed_call(inst, op, t, exc) from None

    def call_raw(self, tag: int, payload: bytes, timeout: float | None = None, *, spin: float = 0.0,
                 op: str = "raw", fds=()) -> bytes | None:
        """A raw verb of the worker (Server.handle_raw) over its local carrier, on the
        calling thread: the reply's payload; None when there is no carrier for it (call
        the verb's framed equivalent then). Failures as call()'s (`op` names the
        request)."""
        inst = self._running_instance()
        t = self.request_timeout if timeout is None else timeout
        try:
            return inst.client_for("local").call_raw(tag, payload, t, watch=_FailureAware(inst), spin=spin, fds=fds)
        except (ServiceGone, MicrokernelTimeout) as exc:
            raise self._failed_call(inst, op, t, exc) from None
        except MicrokernelError:
            if inst.failure is not None:
                raise WorkerError(f"worker '{self.name}' failed: {inst.failure}") from None
            raise

    def _failed_call(self, inst: _Instance, op: str, timeout: float, exc: Exception) -> MicrokernelError:
        """The error of a call whose worker died (ServiceGone) or hung (MicrokernelTimeout),
        or that another caller already found failed."""
        with self._lock:
            if inst.failure is None:
                return (self._died(inst, f"during '{op}'") if isinstance(exc, ServiceGone)
                        else self._hung(inst, op, timeout, "did not answer"))
        return WorkerError(f"worker '{self.name}' (pid {inst.proc.pid}) failed during '{op}': {inst.failure}")

    def ping(self, timeout: float = 5.0) -> dict:
        """Heartbeat: the ping result; raises like call() when the worker is not well."""
        result, _ = self.call("ping", timeout=timeout)
        return result

    def stop(self, grace: float = 2.0) -> int | None:
        """Stop the worker: `shutdown` request, SIGTERM after `grace` s, then SIGKILL.
        Always reaps it. Returns its exit code (None if it was not running).
        Later calls raise WorkerError until start() is called again."""
        with self._lock:
            self._stopped = True
            inst = self._holder.pop("instance", None)
            if inst is None:
                return None
            proc = inst.proc
            healthy = inst.failure is None
            stop_process(proc, (lambda t: inst.client.call("shutdown", timeout=t)) if healthy else None,
                         grace)
            inst.cleanup()
            return proc.returncode

    def __enter__(self) -> "WorkerProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (f"<WorkerProcess {self.name} module={self.module} pid={self.pid} "
                f"endpoint={self.endpoint} restarts={self.restarts}>")


class _FailureAware:
    """The instance's process as a watching caller sees it: also gone once another
    thread marked the instance failed (so concurrent callers stop waiting at once)."""

    def __init__(self, inst: _Instance):
        self._inst = inst

    def alive(self) -> bool:
        return self._inst.failure is None and self._inst.proc.alive()

