"""Life cycle of the long-lived device daemons: start (detached), stop, status.

Used by `mo-core daemon start|stop|status` and by the client (`IECore` with the
"auto" policy starts a daemon when none runs). Device-agnostic: `DEVICES` maps a
device name to the module run as `python -m <module>`; the GPU daemon will be one
more entry.

The detached policy over the launcher (core/microkernel/launcher.py):
* start: under the per-device start lock (registry.start_lock) look for a live
  record; if there is none, launch `python -m device_daemons.cpu --endpoint EP
  --parent-pid 0` (long-lived, in a new session: Ctrl-C in the shell that started
  it does not reach it) with stdout/stderr appended to
  `runtime_dir()/daemon-<device>.log`, wait for its record, then its `hello` while
  watching the process, so a daemon that fails at start is reported at once with
  its log lines. The daemon writes its own record (registry.py) before it answers.
  No restarts here: a client's next request starts a new daemon ("auto" policy).
  A running daemon of another build (its record's `build` is not this code's:
  registry.build_id) is replaced when `replace_other_build` is set and it holds no
  network; one that does is left serving (its record still says so: is_other_build).
* stop: launcher.stop - `shutdown` request (in-flight requests get a short grace),
  then SIGTERM, then SIGKILL, re-checking before each signal that the pid is still
  our daemon; the record and a left-over ipc socket file are removed.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from dataclasses import dataclass

from core.errors import Error
from core.microkernel import (Client, MicrokernelError, check_endpoint, create_key_file, is_loopback, load_key_file,
                              new_ipc_endpoint)
from core.microkernel.endpoints import ipc_path
from core.microkernel.launcher import (Launched, LogFile, Process, ProcessSpec, StartFailure, handshake,
                                       launch as launch_process, stop as stop_process)

from .. import registry

DEVICES = {"CPU": "device_daemons.cpu", "GPU": "device_daemons.gpu"}
_GPU_N = re.compile(r"^GPU\.(\d{1,3})$")  # GPU.N: the N-th OpenCL device, a daemon of its own


class DaemonError(Error):
    """A device daemon could not be started, reached or stopped, or it failed."""


class DaemonNotRunning(DaemonError):
    """No daemon runs for the device and the policy forbids starting one."""


class DaemonDied(DaemonError):
    """The daemon process died while a request was in flight."""


class DaemonTimeout(DaemonError, TimeoutError):
    """The daemon did not answer in time."""


def normalize_device(device: str) -> str:
    """'cpu' -> 'CPU', 'gpu.1' -> 'GPU.1'; a device without a daemon is a DaemonError
    (HETERO:... is the client's, not a daemon: device_daemons/client/hetero)."""
    name = str(device).strip().upper()
    if name in DEVICES or _GPU_N.match(name):
        return name
    available = ", ".join(sorted(DEVICES) + ["GPU.N", "HETERO:DEV1,DEV2"])
    raise DaemonError(f"unknown device '{device}' (available devices: {available})")


def daemon_module(device: str) -> tuple[str, list]:
    """(module run as `python -m`, its device arguments) of a normalized device."""
    if _GPU_N.match(device):
        return DEVICES["GPU"], ["--device", device]
    return DEVICES[device], []


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


def _runtime_key(device: str) -> tuple[str, bytes]:
    """(path, key) of the device's key in the runtime directory, made once and kept: a client
    that signed for the daemon before a restart at the same endpoint signs for the new one
    too (a new key each start left it waiting out its timeout, its messages dropped)."""
    path = registry.key_path(device)
    try:
        return path, load_key_file(path)
    except MicrokernelError:  # none yet, damaged, or readable by others: made (again)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return path, create_key_file(path)


def recorded_key_file(endpoint: str) -> str | None:
    """The key file of this user's running daemon at `endpoint`, if its record names one."""
    return next((r.get("key_file") for r in registry.list_records() if r["endpoint"] == endpoint), None) or None


@dataclass
class Launch:
    record: dict  # the daemon's registry record
    started: bool  # False: one was running already
    proc: Process | None = None  # set when this process spawned it
    info: dict | None = None  # its hello reply, when this process spawned it


def daemon_process(pid: int, popen=None) -> Process:
    """A daemon to watch and stop: our child, or found by the pid of its record
    (checked to still be one of our daemons before every look and signal)."""
    return Process(pid, popen, is_ours=registry.is_daemon_process)


def launch(device: str = "CPU", *, endpoint: str | None = None, key_file: str | None = None,
           threads: int | None = None, startup_timeout: float = 60.0, caffe_fallback: bool = False,
           python_path: list[str] | None = None, replace_other_build: bool = False) -> Launch:
    """Start the daemon of `device` unless one runs; returns its record.
    `python_path`: directories the Caffe worker may import `Python` layers from.
    `replace_other_build`: a running daemon of other code is stopped and a new one
    started when it holds no network (see the module's docstring)."""
    device = normalize_device(device)
    if caffe_fallback and device != "CPU":
        raise DaemonError(f"--caffe-fallback is an option of the CPU daemon, not of {device}")
    key_file = os.path.abspath(key_file) if key_file else None
    key = load_key(key_file)
    # a tcp endpoint needs a key, loopback too: made here for a loopback one given none (the record names it;
    # only this user can read the runtime directory, so this user's clients sign with it and nobody else's);
    # one other machines reach must be given its key on purpose
    make_key = bool(endpoint) and is_loopback(endpoint) and key is None
    if endpoint:
        check_daemon_endpoint(endpoint, key is not None or make_key)
    args = []
    if threads:
        args += ["--threads", str(threads)]
    if caffe_fallback:
        args += ["--caffe-fallback"]
    for directory in python_path or []:
        args += ["--python-path", os.path.abspath(directory)]
    try:
        lock = registry.start_lock(device, timeout=startup_timeout + 10)
        lock.__enter__()
    except (TimeoutError, MicrokernelError) as exc:
        raise DaemonError(f"cannot start the {device} daemon: {exc}") from None
    try:
        record = registry.read_record(device, holding_lock=True)
        if record is not None and replace_other_build and is_other_build(record):
            if not _holds_networks(record):
                print(f"[ INFO ] {other_build(device, record)} and holds no network: replacing it",
                      file=sys.stderr, flush=True)
                _stop_record(device, record, grace=3.0)
                if not args and key_file is None:  # the replacement gets the options the old one had
                    args = _recorded_options(record)
                    key_file = record.get("key_file") or None
                    key = load_key(key_file)
                record = None
        if record is not None:
            return Launch(record, False)
        if make_key:
            key_file, key = _runtime_key(device)
        return _spawn(device, endpoint, key_file, key, args, startup_timeout)
    finally:
        lock.__exit__(None, None, None)


def _recorded_options(record: dict) -> list[str]:
    """The options a daemon's record says it was started with (older records: none);
    only the ones launch() itself passes (--threads N, --caffe-fallback, --python-path
    DIR) are taken."""
    options = record.get("options")
    options = [o for o in options if isinstance(o, str)] if isinstance(options, list) else []
    taken, i = [], 0
    while i < len(options):
        if options[i] == "--caffe-fallback":
            taken.append(options[i])
            i += 1
        elif options[i] in ("--threads", "--python-path") and i + 1 < len(options):
            if options[i] == "--threads" and not options[i + 1].isdigit():
                break
            taken += options[i:i + 2]
            i += 2
        else:
            break  # (something this build does not pass: the rest is not trusted either)
    return taken


def _spawn(device: str, endpoint: str | None, key_file: str | None, key: bytes | None, args: list,
           startup_timeout: float) -> Launch:
    """The detached policy over the launcher: long-lived (no parent watch), its own
    log file in the runtime directory, run in "/" (it must not pin the caller's
    directory), no restarts (a client's next request starts a new one)."""
    try:
        module, device_args = daemon_module(device)
        spec = ProcessSpec(module, f"daemon-{device.lower()}", args=args + device_args,
                           endpoint=endpoint or new_ipc_endpoint(f"daemon-{device.lower()}"),
                           key_file=key_file, parent_pid=0, log=LogFile(registry.log_path(device)), cwd="/")
        proc = launch_process(spec, have_key=key is not None)
    except MicrokernelError as exc:
        raise DaemonError(f"cannot start the {device} daemon: {exc}") from None
    try:
        deadline = time.monotonic() + startup_timeout
        # The daemon records itself once bound (a wildcard tcp port is resolved then),
        # before it serves; then the hello handshake on the recorded endpoint.
        record = _wait_for_record(device, proc, deadline)
        with Client(record["endpoint"], timeout=startup_timeout, key=key) as client:
            try:
                info = handshake(client, proc, max(0.1, deadline - time.monotonic()))
            except StartFailure as exc:
                raise _start_failed(device, proc, exc) from None
    except BaseException:
        proc.cleanup()
        raise
    proc.close_log()
    return Launch(record, True, proc, info)


def is_other_build(record: dict) -> bool:
    """Whether a daemon's record says it runs other code than this process."""
    return record.get("build") != registry.build_id()


def other_build(device: str, record: dict) -> str:
    """What every message about a daemon of another build starts with."""
    return (f"the {device} daemon (pid {record['pid']}) runs another build of mo-core (build "
            f"{record.get('build') or 'unknown'}, this is {registry.build_id()})")


def _holds_networks(record: dict, timeout: float = 5.0) -> bool:
    """Whether the daemon has networks loaded (True also when it does not say)."""
    try:
        with Client(record["endpoint"], timeout=timeout, key=load_key(record.get("key_file"))) as client:
            result, _ = client.call("status", timeout=timeout)
    except (MicrokernelError, DaemonError):
        return True
    return not isinstance(result, dict) or result.get("networks") != []


def _start_failed(device: str, proc: Launched, exc: StartFailure) -> DaemonError:
    if exc.reason == "exited":
        tail = proc.log_tail(20)
        return DaemonError(f"the {device} daemon {exc.status} while starting"
                           + (f"; its log ({proc.spec.log.path}) says:\n{tail}" if tail
                              else f" (its log {proc.spec.log.path} is empty)"))
    if exc.reason == "timeout":
        return DaemonError(f"the {device} daemon (pid {proc.pid}) did not answer in time after starting; "
                           f"it was stopped. See its log {proc.spec.log.path}")
    return DaemonError(f"the {device} daemon failed the handshake: {exc}")


def _wait_for_record(device: str, proc: Launched, deadline: float) -> dict:
    while True:
        record = registry.read_record(device, holding_lock=True)
        if record is not None and record.get("pid") == proc.pid:
            return record
        if not proc.alive():
            raise _start_failed(device, proc, StartFailure("", "exited", proc.exit_status()))
        if time.monotonic() >= deadline:
            raise DaemonError(f"the {device} daemon (pid {proc.pid}) did not record itself in "
                              f"{registry.record_path(device)} in time; it was stopped. See its log "
                              f"{proc.spec.log.path}")
        time.sleep(0.01)


# --------------------------------------------------------------------------- stop

def stop(device: str, *, grace: float = 3.0, proc: Process | None = None) -> dict | None:
    """Stop the daemon of `device`: its record, or None when none was running."""
    device = normalize_device(device)
    record = registry.read_record(device)
    if record is None:
        return None
    return _stop_record(device, record, grace, proc)


def _stop_record(device: str, record: dict, grace: float, proc: Process | None = None) -> dict:
    pid = record["pid"]
    target = proc if proc is not None and proc.pid == pid else daemon_process(pid)

    def request_shutdown(timeout: float) -> None:
        key = load_key(record.get("key_file"))
        with Client(record["endpoint"], timeout=timeout, key=key) as client:
            client.call("shutdown", timeout=timeout)
    try:
        # (+2 s: the daemon itself gives in-flight requests a grace before it exits)
        stop_process(target, request_shutdown, grace + 2.0)
    except DaemonError:  # an unreadable key file: the signals did it
        target.terminate(grace)
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
