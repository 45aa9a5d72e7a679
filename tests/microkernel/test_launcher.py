"""The launcher's pieces on their own: handshake checks, processes found by pid,
escalating stops, private logs, the restart budget (the policies over them are
tested in test_supervisor.py and tests/daemon)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import msgpack
import pytest
import zmq

from core.microkernel import Client, WorkerError, new_ipc_endpoint, runtime_dir
from core.microkernel.launcher import (PrivateLog, Process, ProcessSpec, RestartBudget, StartFailure, handshake,
                                       launch, stop)

from .conftest import ECHO, process_state

pytestmark = pytest.mark.timeout(60)


class FakeService:
    """A ROUTER socket that answers one `hello` with the result it is given."""

    def __init__(self, result: dict):
        self.endpoint = new_ipc_endpoint("fake")
        self.sock = zmq.Context.instance().socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(self.endpoint)
        self.result = result
        self.thread = threading.Thread(target=self._answer, daemon=True)
        self.thread.start()

    def _answer(self):
        if self.sock.poll(10000):
            ident, head = self.sock.recv_multipart()[:2]
            rid = msgpack.unpackb(head)["id"]
            self.sock.send_multipart([ident, msgpack.packb({"v": 1, "id": rid, "ok": True, "result": self.result})])

    def close(self):
        self.thread.join(15)
        self.sock.close(0)


@pytest.mark.parametrize("result, needle", [
    ({"version": 2, "pid": os.getpid()}, "speaks protocol 2"),
    ({"version": 1, "pid": 1}, "is pid 1, not pid"),
])
def test_handshake_checks_version_and_pid(result, needle):
    fake = FakeService(result)
    try:
        with Client(fake.endpoint, timeout=10) as client:
            with pytest.raises(StartFailure, match=needle) as err:
                handshake(client, None, 10, expect_pid=os.getpid())
            assert err.value.reason == "handshake"
    finally:
        fake.close()


def test_handshake_accepts_the_right_service():
    fake = FakeService({"version": 1, "pid": 4242, "service": "fake"})
    try:
        with Client(fake.endpoint, timeout=10) as client:
            assert handshake(client, None, 10, expect_pid=4242)["service"] == "fake"
    finally:
        fake.close()


def test_a_process_that_is_not_ours_is_never_signalled():
    """A pid found in a record may have been reused by another program: before
    every look and signal its identity is checked again."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stranger = Process(sleeper.pid, is_ours=lambda pid: False)
        assert not stranger.alive()
        stranger.terminate(0.2)
        stop(stranger, None, 0.2)
        assert sleeper.poll() is None  # untouched
        ours = Process(sleeper.pid, is_ours=lambda pid: process_state(pid) not in (None, "Z"))
        assert ours.alive() and ours.exit_status() == "still running"
        ours.terminate(2.0)
        assert sleeper.wait(5) == -15 and not ours.alive()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_private_logs_have_no_name_and_the_spawned_command():
    before = set(os.listdir(runtime_dir()))
    proc = launch(ProcessSpec(ECHO, "named", args=["--threads", "0"], log=PrivateLog()))
    try:
        with Client(proc.endpoint, timeout=10) as client:
            assert handshake(client, proc, 20)["pid"] == proc.pid
            # its socket is its only file (bound once it answers): the log has no name
            assert set(os.listdir(runtime_dir())) - before == {os.path.basename(proc.endpoint)}
            with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            assert cmd[1:8] == [b"-m", ECHO.encode(), b"--endpoint", proc.endpoint.encode(), b"--parent-pid",
                                str(os.getpid()).encode(), b"--threads"]
            client.call("say", {"text": "line for the log"})
            assert "line for the log" in proc.log_tail()
            stop(proc, lambda t: client.call("shutdown", timeout=t), 2.0)
        assert proc.returncode == 0
    finally:
        proc.cleanup()
    assert set(os.listdir(runtime_dir())) == before


def test_a_process_that_dies_while_starting_is_reported_with_its_log():
    proc = launch(ProcessSpec("tests.microkernel.no_such_module", "broken"))
    try:
        with Client(proc.endpoint, timeout=10) as client:
            with pytest.raises(StartFailure) as err:
                handshake(client, proc, 20)
        assert err.value.reason == "exited" and err.value.status == "exited with status 1"
        assert "No module named" in err.value.tail
    finally:
        proc.cleanup()


def test_restart_budget():
    budget = RestartBudget(2)
    budget.spend("w", "crashed")
    budget.spend("w", "crashed")
    with pytest.raises(WorkerError, match=r"worker 'w' gave up after 2 restarts \(restart budget 2\); "
                                          r"last failure: killed"):
        budget.spend("w", "killed")
    assert budget.used == 2
