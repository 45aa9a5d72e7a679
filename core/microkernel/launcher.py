"""One launcher for every process of mo-core: workers (supervisor.WorkerProcess)
and long-lived device daemons (device_daemons/client/daemon.py) are two policies over it.

As jupyter_client splits a kernel's *provisioner* (how a process is started,
found, checked and killed) from its *restarter* (when to restart, and how often),
this module holds:

provisioner
  ProcessSpec      what to run: `<interpreter> -m <module> --endpoint EP
                   --parent-pid PID [--key-file F] <args>`, with `env` added to
                   ours, a log (`PrivateLog`: an unnamed file, gone when the last
                   process holding it ends; or `LogFile(path)`: appended, kept),
                   the working directory, the timeouts
  launch(spec)     spawn it in a new session (a Ctrl-C in the terminal reaches
                   the core, which then stops its processes in order) -> Launched;
                   with spec.sandbox, inside the OS sandbox (sandbox.py): its
                   sockets in a directory of its own, its parent followed through
                   a pipe (--lifeline-fd) since it sees no other process
  Process          a process to watch and stop: our child (a Popen) or one found
                   by pid (a daemon another command started), whose identity is
                   re-checked before every signal (pids get reused)
  handshake(...)   the `hello` of a started or found process, awaited while
                   watching it (Client.call(watch=...)): a process that dies while starting is reported at
                   once with its log's last lines; protocol version and pid checked
  stop(...)        `shutdown` request, then SIGTERM after a grace, then SIGKILL;
                   a child is always reaped (no zombies)
restarter
  RestartBudget    how many restarts a policy may spend, and the message once spent

The interpreter may be another Python (e.g. a venv with TensorFlow, whose
protobuf needs differ from the core's): it must have numpy, pyzmq and msgpack;
the launcher puts this checkout first on its PYTHONPATH so `-m` finds our modules.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from .client import Client
from . import sandbox as _sandbox
from .endpoints import check_endpoint, ipc_path, new_ipc_endpoint, runtime_dir
from .errors import MicrokernelError, MicrokernelTimeout, RemoteError, ServiceGone, WorkerError
from .protocol import PROTOCOL_VERSION

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TAIL_BYTES = 8192
_TAIL_LINES = 30
_LOG_ROTATE_BYTES = 4 << 20


# --------------------------------------------------------------------------- exit texts

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


def condense_log(data: bytes, max_lines: int = _TAIL_LINES) -> str:
    """The last lines of a process log, decoded leniently, without the parts of a
    faulthandler dump that bury the real message (stacks of threads other than
    the crashing one, the extension module list)."""
    out: list[str] = []
    skipping = False
    for line in data.decode("utf-8", errors="replace").splitlines():
        if line.startswith("Thread 0x") and line.endswith("(most recent call first):"):
            skipping = True
            continue
        if line.startswith("Extension modules:"):
            continue
        if skipping and (line.startswith("  File ") or not line.strip()):
            continue
        skipping = False
        out.append(line)
    return "\n".join(out[-max_lines:]).strip()


def _tail_bytes(fd: int, offset: int = 0) -> bytes:
    size = os.fstat(fd).st_size
    start = max(offset, size - _TAIL_BYTES)
    return os.pread(fd, max(0, size - start), start)


# --------------------------------------------------------------------------- logs

class PrivateLog:
    """Where a worker's stdout/stderr go: a file in the runtime directory that never
    has a name (O_TMPFILE; where the file system lacks it, a name removed at once),
    so nothing is left behind however the processes end, even if the core is
    killed. The launcher keeps a descriptor to read its last lines."""

    keep = False

    def open(self) -> int:
        directory = runtime_dir()
        try:
            return os.open(directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except (AttributeError, OSError):
            path = os.path.join(directory, f".log-{os.getpid()}-{time.monotonic_ns()}")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            os.unlink(path)
            return fd


@dataclass
class LogFile:
    """A named log (a daemon's), appended to and kept; rotated once past 4 MiB."""
    path: str
    keep = True

    def open(self) -> int:
        with contextlib.suppress(OSError):
            if os.path.getsize(self.path) > _LOG_ROTATE_BYTES:
                os.replace(self.path, self.path + ".1")
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)


# --------------------------------------------------------------------------- processes

class Process:
    """A process to watch and stop: our child (`popen`), or one found by `pid` whose
    identity `is_ours(pid)` confirms (e.g. its command line names our daemons)
    before every look and every signal. With neither (a remote service) nothing
    can be watched: it counts as alive."""

    def __init__(self, pid: int | None, popen: subprocess.Popen | None = None,
                 is_ours: Callable[[int], bool] | None = None):
        self.pid = pid if popen is None else popen.pid
        self.popen = popen
        self._is_ours = is_ours

    @property
    def watchable(self) -> bool:
        return self.popen is not None or (self.pid is not None and self._is_ours is not None)

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None  # also reaps it
        if self.pid is not None and self._is_ours is not None:
            return self._is_ours(self.pid)
        return True

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode if self.popen is not None else None

    def exit_status(self) -> str:
        """How it ended, as far as we can know ('killed by signal SIGKILL', 'is gone')."""
        if self.popen is not None:
            self.popen.poll()
            return describe_exit(self.popen.returncode)
        return "is gone" if not self.alive() else "still running"

    def wait_gone(self, timeout: float) -> bool:
        """Wait up to `timeout` s for it to end (a child is reaped); True when gone."""
        if self.popen is not None:
            try:
                self.popen.wait(timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def signal(self, sig: int) -> None:
        if self.alive() and self.pid is not None and self.watchable:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, sig)

    def terminate(self, grace: float = 1.0) -> None:
        """SIGTERM, wait `grace`, SIGKILL, wait: gone (and reaped) on return."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            if not self.alive():
                break
            self.signal(sig)
            if self.wait_gone(wait):
                break
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(1.0)


def stop(process: Process, request_shutdown: Callable[[float], None] | None, grace: float = 2.0) -> None:
    """Stop a service process: its `shutdown` verb (through `request_shutdown(timeout)`,
    any failure ignored: the signals follow), then SIGTERM after `grace` s, then
    SIGKILL. A child is reaped on return."""
    if request_shutdown is not None and process.alive():
        try:
            request_shutdown(grace)
        except (MicrokernelError, OSError):
            pass
        if process.wait_gone(grace):
            process.terminate(0)  # reaps a child
            return
    process.terminate(grace)


# --------------------------------------------------------------------------- spawning

@dataclass
class ProcessSpec:
    """What to run; see the module doc. `endpoint` None: a fresh ipc endpoint in the
    runtime directory (removed by Launched.cleanup). `parent_pid` None: ours (the
    process exits when we die); 0: long-lived."""
    module: str
    name: str
    interpreter: str = sys.executable
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    endpoint: str | None = None
    key_file: str | None = None
    parent_pid: int | None = None
    log: PrivateLog | LogFile = field(default_factory=PrivateLog)
    cwd: str | None = None
    sandbox: _sandbox.Sandbox | None = None  # run inside the OS sandbox (sandbox.py) where the machine allows


class Launched(Process):
    """A process this one started: its endpoint and log."""

    def __init__(self, popen: subprocess.Popen, spec: ProcessSpec, endpoint: str, own_endpoint: bool,
                 log_fd: int, log_offset: int, own_dir: str | None = None, lifeline: int | None = None):
        super().__init__(popen.pid, popen)
        self.spec = spec
        self.endpoint = endpoint
        self.own_endpoint = own_endpoint
        self._log_fd: int | None = log_fd
        self._log_offset = log_offset
        self.own_dir = own_dir      # a sandboxed process's directory (its sockets); None otherwise
        self._lifeline = lifeline   # our end of its lifeline pipe

    @property
    def sandboxed(self) -> bool:
        return self.own_dir is not None

    def exit_status(self) -> str:
        status = super().exit_status()
        code = self.popen.returncode
        if self.sandboxed and code is not None and 128 < code < 128 + 65:
            # bwrap reports its process's death by signal N as exit status 128 + N
            return describe_exit(128 - code) + " (in its sandbox)"
        return status

    def log_tail(self, max_lines: int = _TAIL_LINES) -> str:
        """The last lines it wrote to stdout/stderr (since this launch)."""
        if self._log_fd is None:
            return ""
        try:
            return condense_log(_tail_bytes(self._log_fd, self._log_offset), max_lines)
        except OSError:
            return ""

    def close_log(self) -> None:
        """Let go of the log (a long-lived process keeps writing its own)."""
        fd, self._log_fd = self._log_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def cleanup(self) -> None:
        """Kill (if needed) and reap it; remove its socket file (when we chose the
        endpoint) and let go of its log."""
        self.terminate(1.0)
        path = ipc_path(self.endpoint) if self.own_endpoint else None
        if path:
            with contextlib.suppress(OSError):
                os.unlink(path)
        if self.own_dir is not None:
            shutil.rmtree(self.own_dir, ignore_errors=True)
        fd, self._lifeline = self._lifeline, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.close_log()


def check_interpreter(interpreter: str) -> None:
    if not (os.path.isfile(interpreter) and os.access(interpreter, os.X_OK)):
        raise WorkerError(f"the Python interpreter {interpreter} does not exist or is not executable; "
                          f"give the path of a python (e.g. a venv's bin/python)")


def launch(spec: ProcessSpec, have_key: bool | None = None) -> Launched:
    """Spawn `spec`; the caller then does the handshake. Raises WorkerError when it
    cannot be spawned, EndpointError for an endpoint that would be insecure."""
    check_interpreter(spec.interpreter)
    sandboxed = _sandbox.active(spec.sandbox)
    own = spec.endpoint is None
    own_dir = _own_directory(spec.name) if sandboxed else None
    endpoint = (f"ipc://{own_dir}/{spec.name}.sock" if own_dir else new_ipc_endpoint(spec.name)) if own \
        else spec.endpoint
    check_endpoint(endpoint, have_key=bool(spec.key_file) if have_key is None else have_key)
    parent = os.getpid() if spec.parent_pid is None else spec.parent_pid
    lifeline = keep = None
    if sandboxed:  # it cannot see our pid: it follows us through a pipe only we hold the other end of
        keep, lifeline = os.pipe2(os.O_CLOEXEC)
        parent = 0
    cmd = [spec.interpreter, "-m", spec.module, "--endpoint", endpoint, "--parent-pid", str(parent)]
    if keep is not None:
        cmd += ["--lifeline-fd", str(keep)]
    if spec.key_file:
        cmd += ["--key-file", spec.key_file]
    cmd += list(spec.args)
    passed: list[int] = []
    if sandboxed:
        try:
            cmd, passed = _sandbox.command(cmd, spec.sandbox, spec.interpreter, own_dir, REPO_ROOT, [keep])
        except BaseException:
            for fd in (keep, lifeline):
                os.close(fd)
            shutil.rmtree(own_dir, ignore_errors=True)
            raise
    env = dict(os.environ)
    env.update({"PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"})  # tracebacks on crash
    env.update(spec.env)
    env["PYTHONPATH"] = os.pathsep.join(
        [REPO_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != REPO_ROOT])
    log_fd = spec.log.open()
    offset = os.fstat(log_fd).st_size
    try:
        popen = _spawn(cmd, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, env=env,
                       cwd=spec.cwd, close_fds=True, start_new_session=True, pass_fds=passed)
    except OSError as exc:
        os.close(log_fd)
        if lifeline is not None:
            os.close(lifeline)
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)
        raise WorkerError(f"cannot start '{spec.name}' ({spec.interpreter} -m {spec.module}): {exc}") from None
    finally:
        for fd in passed:  # the child has its copies
            os.close(fd)
    return Launched(popen, spec, endpoint, own, log_fd, offset, own_dir, lifeline)


# Children are forked from one thread that lives as long as this process: bwrap's
# --die-with-parent (PR_SET_PDEATHSIG) kills the sandbox when the *thread* that forked
# it ends, and a worker a daemon starts for one client's request would otherwise die
# with that client's connection thread.
_spawner: dict = {}
_spawner_lock = threading.Lock()


def _spawn(cmd, **kwargs) -> subprocess.Popen:
    with _spawner_lock:
        executor = _spawner.get(os.getpid())  # (a forked child makes its own: the thread is not there)
        if executor is None:
            _spawner.clear()
            executor = _spawner[os.getpid()] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawner")
    return executor.submit(subprocess.Popen, cmd, **kwargs).result()


_OWN_DIR_PREFIX = "w"


def _own_directory(name: str) -> str:
    """A fresh private directory in the runtime directory for one sandboxed process's
    sockets: `w<our pid>-<name>-<random>`. Those of launchers that no longer live
    (killed before they could clean up) are removed first."""
    import secrets
    base = runtime_dir()
    _remove_stale_directories(base)
    path = os.path.join(base, f"{_OWN_DIR_PREFIX}{os.getpid()}-{name}-{secrets.token_hex(4)}")
    os.mkdir(path, 0o700)
    return path


def _remove_stale_directories(base: str) -> None:
    try:
        names = os.listdir(base)
    except OSError:
        return
    for entry in names:
        pid = entry[len(_OWN_DIR_PREFIX):].split("-", 1)[0] if entry.startswith(_OWN_DIR_PREFIX) else ""
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(base, entry), ignore_errors=True)
        except PermissionError:
            pass


# --------------------------------------------------------------------------- handshake

class StartFailure(MicrokernelError):
    """A process did not come up. `reason`: "exited" (then `status` and `tail`),
    "timeout" or "handshake" (an unexpected or failed `hello`)."""

    def __init__(self, message: str, reason: str, status: str | None = None, tail: str = ""):
        super().__init__(message)
        self.reason, self.status, self.tail = reason, status, tail


def handshake(client: Client, process: Process | None, timeout: float, *,
              expect_pid: int | None = None) -> dict:
    """The `hello` reply of the service behind `client`, awaited for at most `timeout`
    s while watching `process`. Checks the protocol version and that the pid is
    `expect_pid` (default: the process's). Raises StartFailure."""
    watched = process if process is not None and process.watchable else None
    try:
        info, _ = client.call("hello", timeout=timeout, watch=watched)
    except ServiceGone:
        tail = process.log_tail() if isinstance(process, Launched) else ""
        status = process.exit_status()
        raise StartFailure(f"{status} while starting", "exited", status, tail) from None
    except MicrokernelTimeout:
        raise StartFailure(f"no answer to 'hello' within {timeout:g} s", "timeout") from None
    except (MicrokernelError, RemoteError) as exc:
        raise StartFailure(f"the handshake failed: {exc}", "handshake") from None
    pid = expect_pid if expect_pid is not None else (process.pid if process is not None else None)
    if expect_pid is None and isinstance(process, Launched) and process.sandboxed:
        pid = None  # its own pid namespace: it reports another number (its endpoint is in a directory of its own)
    if info.get("version") != PROTOCOL_VERSION:
        raise StartFailure(f"it speaks protocol {info.get('version')!r}, this side "
                           f"{PROTOCOL_VERSION}", "handshake")
    if pid is not None and info.get("pid") != pid:
        raise StartFailure(f"the service at {client.endpoint} is pid {info.get('pid')!r}, not pid {pid}; "
                           f"is another process using that endpoint?", "handshake")
    return info


# --------------------------------------------------------------------------- restarter

class RestartBudget:
    """How many restarts a supervisor may spend on one service: `limit` in all, or,
    with a `window` (seconds), `limit` within any such window - a long-lived worker
    that one bad request crashed now and then keeps serving, one that crashes in a
    loop is refused for a while, never for good."""

    def __init__(self, limit: int, window: float | None = None):
        self.limit = limit
        self.window = window
        self.used = 0
        self._times: list[float] = []

    def spend(self, name: str, last_failure: str | None) -> None:
        """Count one restart; WorkerError once the budget is spent."""
        if self.window is not None:
            now = time.monotonic()
            self._times = [t for t in self._times if now - t < self.window]
            if len(self._times) >= self.limit:
                wait = self.window - (now - self._times[0])
                raise WorkerError(
                    f"worker '{name}' was restarted {len(self._times)} times in the last {self.window:g} s "
                    f"(restart budget {self.limit} per {self.window:g} s); it restarts again in {wait:.0f} s. "
                    f"Last failure: {last_failure}")
            self._times.append(now)
            self.used += 1
            return
        if self.used >= self.limit:
            raise WorkerError(
                f"worker '{name}' gave up after {self.used} restart{'' if self.used == 1 else 's'} "
                f"(restart budget {self.limit}); last failure: {last_failure}")
        self.used += 1

    @property
    def left(self) -> bool:
        """Whether the next restart is within the budget."""
        if self.window is not None:
            now = time.monotonic()
            return sum(1 for t in self._times if now - t < self.window) < self.limit
        return self.used < self.limit
