"""WorkerProcess with real processes: crashes, hangs, restarts, clean stops, orphans."""
from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from core.microkernel import MicrokernelTimeout, RemoteError, WorkerError, WorkerProcess, runtime_dir

from .conftest import ECHO, REPO, children_of, echo_from_threads, process_state, wait_until

pytestmark = pytest.mark.timeout(60)


def _gone(pid: int) -> bool:
    """Reaped by us (no /proc entry) - a zombie would still be listed."""
    return process_state(pid) is None


def test_start_handshake_and_context_manager(runtime_env):
    before = set(os.listdir(runtime_dir()))
    with WorkerProcess(ECHO, name="echo") as w:
        assert w.alive() and w.service_info["service"] == "echo"
        assert w.service_info["pid"] == w.pid
        assert w.ping()["pid"] == w.pid
        pid, sock = w.pid, w.endpoint[len("ipc://"):]
        # its socket is the only file it has: the log has no name
        assert set(os.listdir(runtime_env)) - before == {os.path.basename(sock)}
        assert w.call("say", {"text": "hello from the worker"})[0] == {}
        assert "hello from the worker" in w.stderr_tail()
    assert _gone(pid)
    assert set(os.listdir(runtime_env)) == before


def test_call_starts_lazily():
    w = WorkerProcess(ECHO, name="lazy")
    try:
        assert w.pid is None
        assert w.call("echo", {"a": 1})[0] == {"a": 1}
        assert w.alive()
    finally:
        w.stop()


@pytest.mark.timeout(30)
def test_sigkill_during_request_is_reported_then_restarted():
    with WorkerProcess(ECHO, name="echo", request_timeout=20) as w:
        pid = w.pid
        threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
        t0 = time.monotonic()
        with pytest.raises(WorkerError, match="SIGKILL") as ei:
            w.call("sleep", {"seconds": 30})
        assert time.monotonic() - t0 < 5  # detected at once, not at the 20 s timeout
        assert ei.value.exit_status == "killed by signal SIGKILL"
        assert f"pid {pid}" in str(ei.value) and "'sleep'" in str(ei.value)
        assert _gone(pid)
        result, _ = w.call("echo", {"after": "restart"})
        assert result == {"after": "restart"}
        assert w.pid != pid and w.restarts == 1


def test_abort_message_from_stderr_is_in_the_error():
    with WorkerProcess(ECHO, name="echo") as w:
        text = "F0101 layer.cpp:42] Check failed: bottom.size() == 2 (1 vs. 2)"
        with pytest.raises(WorkerError) as ei:
            w.call("write_stderr", {"text": text})
        assert text in str(ei.value) and text in ei.value.stderr_tail
        assert "SIGABRT" in str(ei.value)


@pytest.mark.parametrize("how, expect", [("exit", "exited with status 3"),
                                         ("abort", "killed by signal SIGABRT"),
                                         ("segv", "killed by signal SIGSEGV")])
def test_crash_kinds_are_named(how, expect):
    with WorkerProcess(ECHO, name="echo") as w:
        pid = w.pid
        with pytest.raises(WorkerError, match=expect):
            w.call("crash", {"how": how})
        assert _gone(pid)
        assert w.call("echo", {"ok": True})[0] == {"ok": True}


def test_restart_budget_exhausted_gives_a_clear_error():
    with WorkerProcess(ECHO, name="echo", restart_budget=2) as w:
        pids = []
        for _ in range(3):  # first run + 2 restarts, each crashes
            pids.append(w.pid if w.alive() else None)
            with pytest.raises(WorkerError, match="status 5"):
                w.call("crash", {"how": "exit", "code": 5})
        assert w.restarts == 2
        for _ in range(2):
            with pytest.raises(WorkerError, match=r"gave up after 2 restarts.*status 5"):
                w.call("echo")
        assert all(_gone(p) for p in pids if p)


@pytest.mark.timeout(30)
def test_hang_times_out_and_the_worker_is_killed():
    with WorkerProcess(ECHO, name="echo", request_timeout=1.0) as w:
        pid = w.pid
        t0 = time.monotonic()
        with pytest.raises(MicrokernelTimeout, match="did not answer within 1 s") as ei:
            w.call("sleep", {"seconds": 60})
        assert 0.9 < time.monotonic() - t0 < 5
        assert "killed" in str(ei.value)
        assert _gone(pid)
        assert w.call("echo", {"x": 1})[0] == {"x": 1} and w.restarts == 1


def test_per_call_timeout_overrides_default():
    with WorkerProcess(ECHO, name="echo", request_timeout=30) as w:
        with pytest.raises(MicrokernelTimeout):
            w.call("sleep", {"seconds": 10}, timeout=0.5)


def test_import_failure_is_reported_at_once_with_stderr():
    w = WorkerProcess("tests.microkernel.no_such_worker", name="missing", startup_timeout=30)
    t0 = time.monotonic()
    with pytest.raises(WorkerError, match="No module named") as ei:
        w.start()
    assert time.monotonic() - t0 < 10
    assert "exited with status 1 while starting" in str(ei.value)
    w.stop()


def test_startup_timeout_kills_the_process():
    w = WorkerProcess("tests.microkernel.hang_worker", name="hang", startup_timeout=1.0)
    with pytest.raises(MicrokernelTimeout, match="did not start within 1 s"):
        w.start()
    pid = w.pid
    assert pid is not None and _gone(pid)
    w.stop()


def test_user_errors_do_not_restart():
    with WorkerProcess(ECHO, name="echo") as w:
        pid = w.pid
        with pytest.raises(RemoteError) as ei:
            w.call("raise_user_error", {"kind": "user", "message": "nope"})
        assert ei.value.kind == "user"
        with pytest.raises(RemoteError, match="internal"):
            w.call("raise_internal")
        assert w.pid == pid and w.restarts == 0


def test_stop_leaves_no_child_process():
    workers = [WorkerProcess(ECHO, name=f"w{i}").start() for i in range(3)]
    pids = [w.pid for w in workers]
    assert set(pids) <= set(children_of(os.getpid()))
    codes = [w.stop() for w in workers]
    assert codes == [0, 0, 0]  # clean exits through the shutdown request
    kids = children_of(os.getpid())
    for pid in pids:
        assert pid not in kids  # neither running nor a zombie
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    assert workers[0].stop() is None  # idempotent


def test_stop_escalates_to_sigkill_for_an_unresponsive_worker():
    w = WorkerProcess(ECHO, name="stuck").start()
    pid = w.pid
    os.kill(pid, signal.SIGSTOP)  # answers nothing, ignores SIGTERM while stopped
    t0 = time.monotonic()
    code = w.stop(grace=0.5)
    assert code == -signal.SIGKILL
    assert time.monotonic() - t0 < 5
    assert _gone(pid)


def test_sigterm_makes_the_worker_exit_cleanly_and_it_is_restarted():
    with WorkerProcess(ECHO, name="echo") as w:
        proc = w._inst.proc.popen
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(5) == 0
        assert w.call("echo", {"x": 2})[0] == {"x": 2}
        assert w.restarts == 1


def test_forgotten_worker_is_reaped_by_its_finalizer():
    w = WorkerProcess(ECHO, name="forgotten").start()
    pid = w.pid
    del w
    gc.collect()
    assert _gone(pid)


@pytest.mark.timeout(60)
def test_worker_exits_when_its_parent_dies(runtime_env):
    """The core killed with SIGKILL (no finalizer): its worker exits and leaves no
    file behind (neither its socket nor its log)."""
    before = set(os.listdir(runtime_dir()))
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {REPO!r})
        from core.microkernel import WorkerProcess
        w = WorkerProcess({ECHO!r}, name="orphan").start()
        w.call("say", {{"text": "something for the log"}})
        print(w.pid, flush=True)
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline()
        worker_pid = int(line)
        assert process_state(worker_pid) not in (None, "Z")
    finally:
        parent.kill()  # SIGKILL: no finalizer, no atexit in the parent
        parent.wait()
        parent.stdout.close()
    assert wait_until(lambda: process_state(worker_pid) in (None, "Z"), timeout=5)
    assert wait_until(lambda: set(os.listdir(runtime_env)) == before, timeout=5), \
        set(os.listdir(runtime_env)) - before


@pytest.mark.timeout(120)
def test_concurrent_calls_through_the_supervisor():
    with WorkerProcess(ECHO, name="echo", threads=2) as w:
        errors = echo_from_threads(lambda op, args, t: w.call(op, args))
        assert not errors, errors[:3]


def test_worker_under_another_interpreter(tmp_path):
    """A worker may run under another Python (e.g. a venv of its own): the launcher
    runs the interpreter it is given, with this checkout on its PYTHONPATH."""
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\nMO_CORE_TEST_WRAPPER=yes exec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    with WorkerProcess(ECHO, name="other", interpreter=str(wrapper),
                       env={"PYTHONPATH": str(tmp_path)}) as w:
        info = w.call("whoami")[0]
        assert info["wrapper"] == "yes" and info["pid"] == w.pid
        assert info["sys_path"][:1] != [""]  # -m from the launcher's PYTHONPATH, not the cwd
    with pytest.raises(WorkerError, match="does not exist or is not executable"):
        WorkerProcess(ECHO, name="none", interpreter=str(tmp_path / "no-python")).start()


@pytest.mark.timeout(60)
def test_calls_on_a_lane_of_the_worker_are_supervised_like_the_main_socket():
    """lane="local": a direct call on the worker's local carrier (its hello names it), a call that is
    not direct on its main socket; a worker without a carrier is called on its main socket; a death on
    the carrier is reported and restarted."""
    with WorkerProcess(ECHO, name="echo", args=["--local"], request_timeout=20) as w:
        assert w.call("lane")[0] == {"lane": "main"}
        assert w.call("lane", lane="local")[0] == {"lane": "main"}
        assert w.call("lane", lane="local", direct=True)[0] == {"lane": "local"}
        pid = w.pid
        threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
        t0 = time.monotonic()
        with pytest.raises(WorkerError, match="SIGKILL"):
            w.call("sleep", {"seconds": 30}, lane="local", direct=True)
        assert time.monotonic() - t0 < 5  # detected at once, not at the 20 s timeout
        assert _gone(pid)
        assert w.call("lane", lane="local", direct=True)[0] == {"lane": "local"}
        assert w.pid != pid and w.restarts == 1
    with WorkerProcess(ECHO, name="echo") as w:  # no local verbs: no carrier
        assert w.call("lane", lane="local", direct=True)[0] == {"lane": "main"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sandboxed", [False, True])
def test_the_parent_is_not_capped_per_process_on_the_local_carrier(sandboxed):
    """Each calling thread of the parent has a connection of its own to its worker's
    carrier (a daemon: one per client connection); the carrier's per-process cap
    (direct.MAX_PER_PEER) is for other processes, so every thread stays on it - also
    from outside a sandboxed worker's pid namespace, where the parent's pid reads 0."""
    from core.microkernel import direct
    from core.microkernel.sandbox import Sandbox
    n = direct.MAX_PER_PEER + 4
    lanes, together = [], threading.Barrier(n)

    def caller():
        lanes.append(w.call("lane", lane="local", direct=True)[0]["lane"])
        together.wait(20)  # (every connection open at once: a thread's goes with it)
    with WorkerProcess(ECHO, name="echo", args=["--local"], request_timeout=20,
                       sandbox=Sandbox() if sandboxed else None) as w:
        threads = [threading.Thread(target=caller) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert lanes == ["local"] * n
