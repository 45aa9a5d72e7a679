"""Shared fixtures: a short private runtime dir, real echo worker processes."""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests.support import wait_until  # noqa: F401  (for the tests)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ECHO = "tests.microkernel.echo_worker"


@pytest.fixture(scope="session", autouse=True)
def runtime_env():
    """Private runtime dir (short path: ipc paths are limited to 107 bytes) and a
    PYTHONPATH so spawned workers can import this checkout."""
    saved = {k: os.environ.get(k) for k in ("MO_CORE_RUNTIME_DIR", "PYTHONPATH")}
    base = tempfile.mkdtemp(prefix="mk-")
    os.environ["MO_CORE_RUNTIME_DIR"] = os.path.join(base, "rt")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, saved["PYTHONPATH"]) if p)
    yield os.environ["MO_CORE_RUNTIME_DIR"]
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def echo_worker():
    from core.microkernel import WorkerProcess
    w = WorkerProcess(ECHO, name="echo", request_timeout=10, startup_timeout=20)
    w.start()
    yield w
    w.stop()


def children_of(pid: int) -> dict[int, str]:
    """{child pid: state letter} of `pid`, read from /proc (zombies included)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            out[int(entry)] = fields[0]
    return out


def process_state(pid: int) -> str | None:
    """State letter of `pid` ('Z' for a zombie), None when it no longer exists."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[0]


def echo_from_threads(call, threads: int = 4, calls: int = 50) -> list:
    """`call(op, args)` from several threads at once, each checking that it gets
    its own echo back: the errors seen (none expected)."""
    import numpy as np

    from tests.support import run_in_threads
    errors = []

    def run(t):
        try:
            for i in range(calls):
                a = np.full(4, t * 1000 + i, np.int64)
                r, _ = call("echo", {"a": a, "t": t}, t)
                assert r["t"] == t and np.array_equal(r["a"], a)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
    run_in_threads(run, threads)
    return errors
