"""Life cycle of the long-lived device daemons: start (detached), stop, status.

Used by `mo-core daemon start|stop|status` and by the client (`IECore` with the
"auto" policy starts a daemon when none runs). Device-agnostic: `DEVICES` maps a
device name to the module run as `python -m <module>`; the GPU daemon will be one
more entry.

* start: under the per-device start lock (registry.start_lock) look for a live
  record; if there is none, spawn `python -m device_daemons.cpu --endpoint EP
  --parent-pid 0` in a new session (no controlling terminal, Ctrl-C in the shell
  that started it does not reach it) with stdout/stderr appended to
  `runtime_dir()/daemon-<device>.log`, then wait for its `hello` while watching the
  process, so a daemon that fails at start is reported at once with its log lines.
  The daemon writes its own record (registry.py) before it answers `hello`.
* stop: `shutdown` request (in-flight requests get a short grace), then SIGTERM,
  then SIGKILL; the record and a left-over ipc socket file are removed.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from core.errors import Error
from core.microkernel import Client, MicrokernelError, check_endpoint, load_key_file, new_ipc_endpoint
from core.microkernel.endpoints import ipc_path
from core.microkernel.supervisor import describe_exit, read_tail

from . import registry

DEVICES = {"CPU": "device_daemons.cpu"}
PLANNED_DEVICES = ("GPU", "HETERO")  # daemons to come; named in the error message
_LOG_ROTATE_BYTES = 4 << 20
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class DaemonError(Error):
    """A device daemon could not be started, reached or stopped, or it failed."""


class DaemonNotRunning(DaemonError):
    """No daemon runs for the device and the policy forbids starting one."""


class DaemonDied(DaemonError):
    """The daemon process died while a request was in flight."""


class DaemonTimeout(DaemonError, TimeoutError):
    """The daemon did not answer in time."""


def normalize_device(device: str) -> str:
    """'cpu' -> 'CPU'; a device without a daemon is a DaemonError."""
    name = str(device).strip().upper()
    if name in DEVICES:
        return name
    available = ", ".join(sorted(DEVICES))
    if name.split(":")[0] in PLANNED_DEVICES:
        raise DaemonError(f"device '{device}' is not available yet: there is no {name.split(':')[0]} "
                          f"daemon in this version (available devices: {available})")
    raise DaemonError(f"unknown device '{device}' (available devices: {available})")


def load_key(key_file: str | None) -> bytes | None:
    if not key_file:
        return None
    try:
        return load_key_file(key_file)
    except MicrokernelError as exc:
        raise DaemonError(str(exc)) from None


def check_daemon_endpoint(endpoint: str, have_key: bool) -> None:
    try:
        check_endpoint(endpoint, have_key=have_key)
    except MicrokernelError as exc:
        raise DaemonError(str(exc)) from None


def _open_log(path: str) -> int:
    with contextlib.suppress(OSError):
        if os.path.getsize(path) > _LOG_ROTATE_BYTES:
            os.replace(path, path + ".1")
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)


@dataclass
class Launch:
    record: dict  # the daemon's registry record
    started: bool  # False: one was running already
    proc: subprocess.Popen | None = None  # set when this process spawned it
    info: dict | None = None  # its hello reply, when this process spawned it


def launch(device: str = "CPU", *, endpoint: str | None = None, key_file: str | None = None,
           threads: int | None = None, startup_timeout: float = 60.0, caffe_fallback: bool = False) -> Launch:
    """Start the daemon of `device` unless one runs; returns its record."""
    device = normalize_device(device)
    key_file = os.path.abspath(key_file) if key_file else None
    key = load_key(key_file)
    if endpoint:
        check_daemon_endpoint(endpoint, key is not None)
    try:
        lock = registry.start_lock(device, timeout=startup_timeout + 10)
        lock.__enter__()
    except (TimeoutError, MicrokernelError) as exc:
        raise DaemonError(f"cannot start the {device} daemon: {exc}") from None
    try:
        record = registry.read_record(device, holding_lock=True)
        if record is not None:
            return Launch(record, False)
        return _spawn(device, endpoint, key_file, key, threads, startup_timeout, caffe_fallback)
    finally:
        lock.__exit__(None, None, None)


def _spawn(device: str, endpoint: str | None, key_file: str | None, key: bytes | None,
           threads: int | None, startup_timeout: float, caffe_fallback: bool = False) -> Launch:
    try:
        endpoint = endpoint or new_ipc_endpoint(f"daemon-{device.lower()}")
    except MicrokernelError as exc:
        raise DaemonError(str(exc)) from None
    log = registry.log_path(device)
    fd = _open_log(log)
    offset = os.fstat(fd).st_size
    cmd = [sys.executable, "-m", DEVICES[device], "--endpoint", endpoint, "--parent-pid", "0"]
    if key_file:
        cmd += ["--key-file", key_file]
    if threads:
        cmd += ["--threads", str(threads)]
    if caffe_fallback:
        cmd += ["--caffe-fallback"]
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    # The daemon runs in "/" (it must not pin the caller's directory), so make sure
    # it imports this very installation of mo-core.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO_ROOT, env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=env,
                                cwd="/", close_fds=True, start_new_session=True)
    except OSError as exc:
        raise DaemonError(f"cannot start the {device} daemon ({cmd[0]}): {exc}") from None
    finally:
        os.close(fd)
    try:
        deadline = time.monotonic() + startup_timeout
        # The daemon records itself once bound (a wildcard tcp port is resolved then),
        # before it serves; then the hello handshake on the recorded endpoint.
        record = _wait_for_record(device, proc, deadline, log, offset)
        info = _handshake(device, proc, record["endpoint"], key, deadline, log, offset)
        if info.get("pid") != proc.pid:
            raise DaemonError(f"the {device} daemon at {record['endpoint']} answered as pid "
                              f"{info.get('pid')}, but the process started is pid {proc.pid}; is "
                              f"another daemon using that endpoint?")
    except BaseException:
        _terminate(proc.pid, proc, grace=1.0)
        raise
    return Launch(record, True, proc, info)


def _exited_error(device, proc, log, offset) -> DaemonError:
    tail = read_tail(log, 20, offset)
    return DaemonError(f"the {device} daemon {describe_exit(proc.returncode)} while starting"
                       + (f"; its log ({log}) says:\n{tail}" if tail else f" (its log {log} is empty)"))


def _wait_for_record(device, proc, deadline, log, offset) -> dict:
    while True:
        record = registry.read_record(device, holding_lock=True)
        if record is not None and record.get("pid") == proc.pid:
            return record
        if proc.poll() is not None:
            raise _exited_error(device, proc, log, offset)
        if time.monotonic() >= deadline:
            raise DaemonError(f"the {device} daemon (pid {proc.pid}) did not record itself in "
                              f"{registry.record_path(device)} in time; it was stopped. See its log {log}")
        time.sleep(0.01)


def _handshake(device, proc, endpoint, key, deadline, log, offset) -> dict:
    client = Client(endpoint, timeout=max(1.0, deadline - time.monotonic()), key=key)
    try:
        pending = client.call_async("hello")
        while not pending.wait(0.05):
            if proc.poll() is not None:
                if pending.wait(0.05):
                    break
                raise _exited_error(device, proc, log, offset)
            if time.monotonic() >= deadline:
                pending.cancel()
                raise DaemonError(f"the {device} daemon (pid {proc.pid}) did not answer in time "
                                  f"after starting; it was stopped. See its log {log}")
        try:
            info, _ = pending.result(0)
        except MicrokernelError as exc:
            raise DaemonError(f"the {device} daemon failed the handshake: {exc}") from None
        return info
    finally:
        client.close()


# --------------------------------------------------------------------------- stop

def _alive(pid: int, proc: subprocess.Popen | None) -> bool:
    if proc is not None and proc.poll() is not None:
        return False
    return registry.is_daemon_process(pid)


def _wait_gone(pid: int, proc: subprocess.Popen | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid, proc):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _terminate(pid: int, proc: subprocess.Popen | None, grace: float) -> None:
    """SIGTERM, wait `grace`, SIGKILL, wait: the daemon is gone on return."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if not _alive(pid, proc):
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        if _wait_gone(pid, proc, wait):
            break
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(1.0)  # reap our own child


def stop(device: str, *, grace: float = 3.0, proc: subprocess.Popen | None = None) -> dict | None:
    """Stop the daemon of `device`: its record, or None when none was running."""
    device = normalize_device(device)
    record = registry.read_record(device)
    if record is None:
        return None
    pid = record["pid"]
    try:
        key = load_key(record.get("key_file"))
        with Client(record["endpoint"], timeout=grace, key=key) as client:
            client.call("shutdown", timeout=grace)
    except (MicrokernelError, DaemonError):
        pass  # not answering: the signals below do it
    if not _wait_gone(pid, proc, grace + 2.0):
        _terminate(pid, proc, grace)
    elif proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(1.0)
    registry.remove_record(device, pid)
    path = ipc_path(record["endpoint"])
    if path and os.path.dirname(path) == registry.runtime_dir():
        with contextlib.suppress(OSError):
            os.unlink(path)  # left behind by a daemon that had to be killed
    return record


def running_devices() -> list[str]:
    return [r.get("device", "?") for r in registry.list_records()]


# --------------------------------------------------------------------------- status

def status(timeout: float = 5.0) -> list[dict]:
    """One dict per running daemon: its record merged with its `status` reply (or
    an "error" entry when it does not answer)."""
    out = []
    for record in registry.list_records():
        entry = dict(record)
        try:
            key = load_key(record.get("key_file"))
            with Client(record["endpoint"], timeout=timeout, key=key) as client:
                result, _ = client.call("status", timeout=timeout)
            entry.update(result)
        except (MicrokernelError, DaemonError) as exc:
            entry["error"] = f"not answering: {exc}"
        out.append(entry)
    return out
