"""Supervision of worker processes: spawn, handshake, call, restart, stop.

A WorkerProcess runs `python -m <module> --endpoint EP --parent-pid <our pid>` (a
module whose __main__ uses server.serve_main). Its stdout/stderr go to a file in
the runtime directory so that when it dies - a Python traceback at import, a C++
CHECK failure, a segfault - the last lines can be put into the error message.

Failure handling, in one place:
* start: the `hello` handshake is awaited while polling the process, so a worker
  that dies at import is reported at once with its stderr, not after a timeout;
* call: while waiting for the reply the process is polled too: death -> WorkerError
  naming the exit status / signal and the stderr tail; no reply in time ->
  MicrokernelTimeout and the (hung) process is killed;
* the next call restarts a dead worker while the restart budget lasts, then every
  call raises "gave up after N restarts";
* stop: `shutdown` request, then SIGTERM after a grace period, then SIGKILL, and
  always waitpid (no zombies). A weakref finalizer (run at exit too) kills a worker
  whose WorkerProcess was forgotten; the worker's own parent-pid watch covers the
  case where the core dies without running any finalizer (SIGKILL).
"""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import weakref
from typing import Any, Sequence

import numpy as np

from .auth import load_key_file
from .client import Client
from .endpoints import check_endpoint, ipc_path, new_ipc_endpoint, runtime_dir
from .errors import MicrokernelError, MicrokernelTimeout, RemoteError, WorkerError
from .protocol import PROTOCOL_VERSION

_POLL_S = 0.05  # how often a waiting call looks at the process
_TAIL_BYTES = 8192
_TAIL_LINES = 30


def describe_exit(returncode: int | None) -> str:
    """'exited with status 3' / 'killed by signal SIGSEGV' / 'still running'."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by signal {name}"
    return f"exited with status {returncode}"


def read_tail(path: str | None, max_lines: int = _TAIL_LINES, offset: int = 0) -> str:
    """The last lines of a (log) file written after `offset`, decoded leniently; ''
    if unreadable."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(offset, size - _TAIL_BYTES))
            data = f.read()
    except OSError:
        return ""
    lines = _condense_faulthandler(data.decode("utf-8", errors="replace").splitlines())
    return "\n".join(lines[-max_lines:]).strip()


def _condense_faulthandler(lines: list[str]) -> list[str]:
    """Drop the parts of a faulthandler dump that bury the real message: stacks of
    threads other than the crashing one, and the extension module list."""
    out: list[str] = []
    skipping = False
    for line in lines:
        if line.startswith("Thread 0x") and line.endswith("(most recent call first):"):
            skipping = True
            continue
        if line.startswith("Extension modules:"):
            continue
        if skipping and (line.startswith("  File ") or not line.strip()):
            continue
        skipping = False
        out.append(line)
    return out


def _kill_and_reap(proc: subprocess.Popen, grace: float = 1.0) -> None:
    """SIGTERM, wait `grace`, SIGKILL, wait: the process is reaped on return."""
    if proc.poll() is None:
        try:
            proc.terminate()
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()


class _Instance:
    """One running incarnation of a worker: process, client, files."""

    def __init__(self, proc: subprocess.Popen, client: Client, endpoint: str, log_path: str,
                 own_endpoint: bool):
        self.proc = proc
        self.client = client
        self.endpoint = endpoint
        self.log_path = log_path
        self.own_endpoint = own_endpoint
        self.failure: str | None = None  # why it is considered dead

    def cleanup(self, keep_log: bool = False) -> None:
        """Kill (if needed) and reap the process; remove its socket and log files."""
        self.client.close()
        _kill_and_reap(self.proc)
        path = ipc_path(self.endpoint) if self.own_endpoint else None
        for p in (path, None if keep_log else self.log_path):
            if p:
                try:
                    os.unlink(p)
                except OSError:
                    pass


def _finalize(holder: dict) -> None:
    """Finalizer (GC or interpreter exit): never leave a worker behind."""
    inst = holder.pop("instance", None)
    if inst is not None:
        inst.cleanup()


class WorkerProcess:
    """A supervised worker process speaking the microkernel protocol.

    `WorkerProcess(module, name=..., endpoint=None, args=(), env=None,
    startup_timeout=30, request_timeout=60, restart_budget=3, key_file=None,
    threads=None)`. `start()` (or `with WorkerProcess(...) as w:`) spawns it;
    `call(op, args, arrays, timeout)` starts it on demand. Thread-safe.
    """

    def __init__(self, module: str, *, name: str, endpoint: str | None = None,
                 args: Sequence[str] = (), env: dict[str, str] | None = None,
                 startup_timeout: float = 30.0, request_timeout: float = 60.0,
                 restart_budget: int = 3, key_file: str | None = None,
                 threads: int | None = None) -> None:
        self.module = module
        self.name = name
        self.endpoint_hint = endpoint
        self.args = list(args)
        self.env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.request_timeout = request_timeout
        self.restart_budget = restart_budget
        self.key_file = key_file
        self.threads = threads
        self._key = load_key_file(key_file) if key_file else None
        self.restarts = 0
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

    @property
    def log_path(self) -> str | None:
        inst = self._inst
        return inst.log_path if inst else None

    def alive(self) -> bool:
        inst = self._inst
        return inst is not None and inst.failure is None and inst.proc.poll() is None

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
        if self.restarts >= self.restart_budget:
            raise WorkerError(
                f"worker '{self.name}' gave up after {self.restarts} restart"
                f"{'' if self.restarts == 1 else 's'} (restart budget {self.restart_budget}); "
                f"last failure: {self._last_failure}")
        self.restarts += 1
        self._discard_instance()
        self._spawn()

    def _discard_instance(self) -> None:
        inst = self._holder.pop("instance", None)
        if inst is not None:
            inst.cleanup()

    def _spawn(self) -> None:
        own = self.endpoint_hint is None
        endpoint = new_ipc_endpoint(self.name) if own else self.endpoint_hint
        check_endpoint(endpoint, have_key=self._key is not None)  # before spawning anything
        log_path = os.path.join(runtime_dir(),
                                f"{self.name}-{os.getpid()}-{secrets.token_hex(4)}.log")
        cmd = [sys.executable, "-m", self.module, "--endpoint", endpoint,
               "--parent-pid", str(os.getpid())]
        if self.key_file:
            cmd += ["--key-file", self.key_file]
        if self.threads is not None:
            cmd += ["--threads", str(self.threads)]
        cmd += self.args
        env = dict(os.environ)
        env.update({"PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"})  # tracebacks on crash
        env.update(self.env)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            # A new session: a Ctrl-C in the terminal goes to the core, which then
            # stops its workers in order, rather than killing them mid-request.
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                                    env=env, close_fds=True, start_new_session=True)
        except OSError as exc:
            os.close(fd)
            self._last_failure = f"cannot spawn {cmd[0]}: {exc}"
            raise WorkerError(f"cannot start worker '{self.name}': {exc}") from None
        os.close(fd)
        client = Client(endpoint, timeout=self.request_timeout, key=self._key)
        inst = _Instance(proc, client, endpoint, log_path, own)
        self._holder["instance"] = inst
        self._started_once = True
        self._handshake(inst)

    def _handshake(self, inst: _Instance) -> None:
        pending = inst.client.call_async("hello")
        deadline = time.monotonic() + self.startup_timeout
        while not pending.wait(_POLL_S):
            if inst.proc.poll() is not None:
                if pending.wait(0.05):  # replied just before exiting
                    break
                raise self._died(inst, "while starting")
            if time.monotonic() >= deadline:
                pending.cancel()
                raise self._hung(inst, "hello", self.startup_timeout, "did not start")
        try:
            info, _ = pending.result(0)
        except MicrokernelError as exc:
            inst.failure = f"bad handshake: {exc}"
            self._last_failure = inst.failure
            inst.cleanup(keep_log=True)
            raise WorkerError(f"worker '{self.name}' failed the handshake: {exc}") from None
        if info.get("version") != PROTOCOL_VERSION or info.get("pid") != inst.proc.pid:
            inst.failure = f"unexpected hello reply {info!r}"
            self._last_failure = inst.failure
            inst.cleanup(keep_log=True)
            raise WorkerError(
                f"worker '{self.name}' at {inst.endpoint} answered hello with {info!r}; expected "
                f"protocol version {PROTOCOL_VERSION} from pid {inst.proc.pid}")
        self.service_info = info

    def _died(self, inst: _Instance, when: str) -> WorkerError:
        """Record the death of `inst` and build the error that reports it."""
        inst.proc.wait()  # reap
        status = describe_exit(inst.proc.returncode)
        tail = read_tail(inst.log_path)
        inst.failure = f"{status} {when}"
        self._last_failure = inst.failure
        msg = f"worker '{self.name}' (pid {inst.proc.pid}) {status} {when}"
        if tail:
            msg += f"; its last stderr lines:\n{tail}"
        else:
            msg += " (it wrote nothing to stderr)"
        inst.client.close()
        return WorkerError(msg, exit_status=status, stderr_tail=tail)

    def _hung(self, inst: _Instance, op: str, timeout: float, what: str) -> MicrokernelTimeout:
        """Kill a worker that did not answer in time and build the error."""
        inst.failure = f"{what} within {timeout:g} s"
        self._last_failure = inst.failure
        inst.client.close()
        _kill_and_reap(inst.proc, grace=0.5)
        tail = read_tail(inst.log_path, 10)
        msg = (f"worker '{self.name}' (pid {inst.proc.pid}) {what} within {timeout:g} s "
               f"('{op}'); it was killed")
        if self.restarts < self.restart_budget:
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
            elif inst.failure is not None or inst.proc.poll() is not None:
                if inst.failure is None:  # died while idle
                    self._died(inst, "while idle")
                self._restart_or_give_up()
            inst = self._inst
            assert inst is not None
            return inst

    def call(self, op: str, args: dict | None = None,
             arrays: Sequence[np.ndarray] | None = None,
             timeout: float | None = None) -> tuple[dict, list]:
        """Call a verb of the worker: (result, arrays). Raises RemoteError for an
        error reply, WorkerError when the worker dies (or cannot be restarted),
        MicrokernelTimeout when it hangs (it is killed; the next call restarts it)."""
        inst = self._running_instance()
        t = self.request_timeout if timeout is None else timeout
        try:
            pending = inst.client.call_async(op, args, arrays)
        except MicrokernelError:
            if inst.failure is not None:  # closed by a concurrent failure
                raise WorkerError(f"worker '{self.name}' failed: {inst.failure}") from None
            raise
        deadline = time.monotonic() + t
        while not pending.wait(_POLL_S):
            if inst.proc.poll() is not None or inst.failure is not None:
                if pending.wait(0.05):
                    break
                pending.cancel()
                with self._lock:
                    if inst.failure is None:
                        raise self._died(inst, f"during '{op}'")
                raise WorkerError(f"worker '{self.name}' (pid {inst.proc.pid}) failed during "
                                  f"'{op}': {inst.failure}")
            if time.monotonic() >= deadline:
                pending.cancel()
                with self._lock:
                    if inst.failure is None:
                        raise self._hung(inst, op, t, "did not answer")
                raise WorkerError(f"worker '{self.name}' failed during '{op}': {inst.failure}")
        return pending.result(0)

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
            if inst.failure is None and proc.poll() is None:
                try:
                    inst.client.call("shutdown", timeout=grace)
                except (MicrokernelError, RemoteError):
                    pass
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    pass
            inst.client.close()
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    proc.kill()
            proc.wait()
            inst.cleanup()
            return proc.returncode

    def __enter__(self) -> "WorkerProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (f"<WorkerProcess {self.name} module={self.module} pid={self.pid} "
                f"endpoint={self.endpoint} restarts={self.restarts}>")
