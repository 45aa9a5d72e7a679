"""Records of running device daemons, kept in the private runtime directory.

A daemon writes `runtime_dir()/daemon-<device>.json` once it has bound its endpoint
(service/record.py) and removes it when it exits cleanly:

    {"device": "CPU", "pid": 1234, "endpoint": "ipc://...", "started": 1700000000.0,
     "version": "0.1.0", "build": "3f2a...", "protocol": 1, "key_file": null,
     "log": ".../daemon-cpu.log"}

`build` says which code the daemon runs (`build_id`): a daemon is long-lived, so
after an upgrade or a change to a checkout the one running may still be the old
code; clients compare it with their own (client/daemon.py replaces an idle one).

Files are written atomically (temporary file + rename) with mode 0600 inside the
0700 runtime directory. Readers never trust a record blindly: one whose pid is dead,
a zombie, or a process that is not one of our daemons (pids get reused: its
/proc/PID/cmdline must mention `device_daemons`) is stale and is deleted.

Starting a daemon is serialized per device by an advisory lock
(`daemon-<device>.lock`, see `start_lock`), so two clients with the "auto" policy
that find no daemon at the same moment start one daemon, not two.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import os
import re
import time
from typing import Iterator

from core.microkernel import runtime_dir

RECORD_PREFIX = "daemon-"
_DEVICE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,15}(\.[0-9]{1,3})?$")  # CPU, GPU, GPU.1
_MARKER = b"device_daemons"


def _device_slug(device: str) -> str:
    if not isinstance(device, str) or not _DEVICE_RE.match(device):
        raise ValueError(f"bad device name {device!r}")
    return device.lower()


def record_path(device: str) -> str:
    return os.path.join(runtime_dir(), f"{RECORD_PREFIX}{_device_slug(device)}.json")


def key_path(device: str) -> str:
    """The HMAC key file `mo-core daemon start` makes for a tcp endpoint given without one."""
    return os.path.join(runtime_dir(), f"{RECORD_PREFIX}{_device_slug(device)}.key")


def log_path(device: str) -> str:
    """Where a detached daemon's stdout/stderr go."""
    return os.path.join(runtime_dir(), f"{RECORD_PREFIX}{_device_slug(device)}.log")


@functools.lru_cache(maxsize=1)
def package_version() -> str:
    try:
        from importlib.metadata import version
        return version("mo-core")
    except Exception:  # not installed (running from a checkout)
        return "0+unknown"


# The code a daemon runs: its packages' sources (kernels included), by content, so a
# fresh checkout of the same commit (new mtimes) is the same build.
_BUILD_PACKAGES = ("core", "ir", "device_daemons", "fallback_workers")
_BUILD_SUFFIXES = (".py", ".cl", ".c", ".h", ".json", ".proto")


@functools.lru_cache(maxsize=1)
def build_id() -> str:
    """A short digest of the sources this process runs (computed once: ~20 ms here)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256(package_version().encode())
    for package in _BUILD_PACKAGES:
        for directory, dirs, files in os.walk(os.path.join(root, package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(f for f in files if f.endswith(_BUILD_SUFFIXES)):
                path = os.path.join(directory, name)
                digest.update(os.path.relpath(path, root).encode() + b"\0")
                with contextlib.suppress(OSError):
                    with open(path, "rb") as f:
                        digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------- processes

def process_state(pid: int) -> str | None:
    """State letter of `pid` from /proc ('Z' zombie, 'R', 'S', ...), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    try:
        return stat[stat.rindex(b")") + 2:].split()[0].decode()
    except (ValueError, IndexError):
        return None


def is_daemon_process(pid: int) -> bool:
    """True when `pid` runs (not a zombie) and its command line is one of our daemons."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    state = process_state(pid)
    if state is None or state in ("Z", "X", "x"):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return False
    return _MARKER in cmdline


# --------------------------------------------------------------------------- records

def _load(path: str) -> dict | None:
    try:
        with open(path, "rb") as f:
            data = f.read(65536)
        record = json.loads(data)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int) \
            or not isinstance(record.get("endpoint"), str):
        return None
    return record


def _remove_if_unchanged(path: str, record: dict | None) -> None:
    """Delete `path` if it still holds `record` (None: an unreadable record), and the
    socket files of the dead daemon it names (its ipc endpoint and local carrier: a
    killed daemon cannot remove them itself)."""
    with contextlib.suppress(OSError):
        if _load(path) == record:
            os.unlink(path)
            socket = record["endpoint"][len("ipc://"):] if record is not None and \
                record["endpoint"].startswith("ipc://") and not record["endpoint"].startswith("ipc://@") else None
            for leftover in ([socket, socket + ".direct"] if socket else []):
                if os.path.dirname(leftover) == os.path.dirname(path):  # (only in the runtime directory)
                    with contextlib.suppress(OSError):
                        os.unlink(leftover)


def read_record(device: str, *, holding_lock: bool = False) -> dict | None:
    """The record of a live daemon for `device`, or None. Stale records are removed
    (unless a start of that device is in progress elsewhere: then it is left to the
    starter; pass holding_lock=True when the caller holds the start lock)."""
    path = record_path(device)
    if not os.path.exists(path):
        return None
    record = _load(path)
    if record is not None and is_daemon_process(record["pid"]):
        return record
    if holding_lock:
        _remove_if_unchanged(path, record)
    else:
        with try_start_lock(device) as locked:
            if locked:
                _remove_if_unchanged(path, record)
    return None


def remove_record(device: str, pid: int) -> bool:
    """Remove the record of `device` if it names `pid` (a newer daemon's stays)."""
    path = record_path(device)
    record = _load(path)
    if record is not None and record.get("pid") == pid:
        with contextlib.suppress(OSError):
            os.unlink(path)
            return True
    return False


def list_records() -> list[dict]:
    """Records of all live daemons (stale ones are removed), sorted by device."""
    out = []
    try:
        names = sorted(os.listdir(runtime_dir()))
    except OSError:
        return out
    for name in names:
        m = re.fullmatch(RECORD_PREFIX + r"([a-z][a-z0-9_]{0,15}(?:\.[0-9]{1,3})?)\.json", name)
        if m:
            record = read_record(m.group(1))
            if record is not None:
                out.append(record)
    return out


# --------------------------------------------------------------------------- start lock

def _open_lock(device: str) -> int:
    path = os.path.join(runtime_dir(), f"{RECORD_PREFIX}{_device_slug(device)}.lock")
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


@contextlib.contextmanager
def start_lock(device: str, timeout: float = 120.0) -> Iterator[None]:
    """Hold the (inter-process) start lock of `device`; TimeoutError after `timeout`."""
    fd = _open_lock(device)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"another process has been starting the {device} daemon "
                                       f"for more than {timeout:g} s") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def try_start_lock(device: str) -> Iterator[bool]:
    """The start lock if it is free right now (yields True), else yields False."""
    try:
        fd = _open_lock(device)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked = True
        except OSError:
            locked = False
        yield locked
    finally:
        os.close(fd)
