"""`mo-core daemon start|stop|status`, the registry records, endpoint security."""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest

from tests.daemon.conftest import F32, assert_close, daemon_processes, run_mo, wait_until
from tests.support import REPO


def _record(runtime):
    with open(os.path.join(runtime, "daemon-cpu.json")) as f:
        return json.load(f)


@pytest.mark.timeout(120)
def test_start_status_stop_leaves_no_process(fresh_runtime, tiny):
    proc = run_mo("daemon", "start")
    assert proc.returncode == 0, proc.stderr
    m = re.search(r"CPU daemon started: pid (\d+), endpoint (ipc://\S+)", proc.stdout)
    assert m, proc.stdout
    pid, endpoint = int(m.group(1)), m.group(2)
    assert daemon_processes(fresh_runtime) == [pid]
    rec = _record(fresh_runtime)
    assert rec["pid"] == pid and rec["endpoint"] == endpoint and rec["device"] == "CPU"
    assert {"started", "version"} <= set(rec)
    path = os.path.join(fresh_runtime, "daemon-cpu.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(fresh_runtime).st_mode) == 0o700
    # detached: its own session, not a child of the (finished) CLI process
    assert os.getsid(pid) == pid

    again = run_mo("daemon", "start")
    assert again.returncode == 0, again.stderr
    assert f"already running: pid {pid}" in again.stdout
    assert daemon_processes(fresh_runtime) == [pid]

    # it serves: a client finds it through the record
    from device_daemons.client import IECore
    ie = IECore(policy="existing")
    exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU")
    exec_net.infer({"data": tiny.input(0)})
    assert ie.daemon_pid() == pid

    status = run_mo("daemon", "status")
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0].split() == ["DEVICE", "PID", "ENDPOINT", "UPTIME", "NETWORKS", "REQUESTS"]
    row = lines[1].split()
    assert row[0] == "CPU" and row[1] == str(pid) and row[2] == endpoint
    assert re.fullmatch(r"\d\d:\d\d:\d\d", row[3])
    assert row[4] == "1" and int(row[5]) >= 1
    assert "tiny" in status.stdout
    ie.close()

    stop = run_mo("daemon", "stop")
    assert stop.returncode == 0, stop.stderr
    assert f"CPU daemon stopped (pid {pid})" in stop.stdout
    assert wait_until(lambda: not daemon_processes(fresh_runtime), 5)
    assert not os.path.exists(path)
    assert not os.path.exists(endpoint[len("ipc://"):])  # socket file removed

    again = run_mo("daemon", "stop")
    assert again.returncode == 0 and "no CPU daemon is running" in again.stdout
    none = run_mo("daemon", "status")
    assert none.returncode == 0 and "no daemon is running" in none.stdout


@pytest.mark.timeout(120)
def test_stop_all_and_log(fresh_runtime):
    proc = run_mo("daemon", "start", "--device", "cpu", "--threads", "1")
    assert proc.returncode == 0, proc.stderr
    pid = _record(fresh_runtime)["pid"]
    log = os.path.join(fresh_runtime, "daemon-cpu.log")
    assert f"pid {pid} serving" in open(log).read()
    stop = run_mo("daemon", "stop", "--all")
    assert stop.returncode == 0 and f"(pid {pid})" in stop.stdout
    assert wait_until(lambda: not daemon_processes(fresh_runtime), 5)
    assert f"pid {pid} stopped: shutdown requested" in open(log).read()


@pytest.mark.timeout(120)
def test_stop_a_daemon_that_ignores_shutdown(fresh_runtime):
    """A daemon that does not answer (SIGSTOP) is stopped with signals."""
    import signal
    proc = run_mo("daemon", "start")
    assert proc.returncode == 0, proc.stderr
    pid = _record(fresh_runtime)["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        stop = run_mo("daemon", "stop", "--grace", "0.5")
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
    assert stop.returncode == 0, stop.stderr
    assert wait_until(lambda: not daemon_processes(fresh_runtime), 5)
    assert not os.path.exists(os.path.join(fresh_runtime, "daemon-cpu.json"))


@pytest.mark.timeout(120)
def test_tcp_loopback_endpoint(fresh_runtime, tiny):
    proc = run_mo("daemon", "start", "--endpoint", "tcp://127.0.0.1:*")
    assert proc.returncode == 0, proc.stderr
    endpoint = _record(fresh_runtime)["endpoint"]
    assert re.fullmatch(r"tcp://127\.0\.0\.1:\d+", endpoint), endpoint
    # every local user can reach a loopback port: the start made a key only this user can read, its
    # clients sign with it (found by the record); a client without it is not answered
    key_file = _record(fresh_runtime)["key_file"]
    assert key_file.startswith(fresh_runtime) and os.stat(key_file).st_mode & 0o777 == 0o600
    import msgpack
    from device_daemons.client import IECore
    from tests.daemon.conftest import raw_reply, raw_socket
    stranger = raw_socket(endpoint)
    stranger.send_multipart([msgpack.packb({"v": 1, "id": 1, "op": "shutdown", "args": {}})])
    assert raw_reply(stranger, 1500) is None
    stranger.close()
    with IECore(policy="existing") as ie:
        out = ie.load_network(ie.read_network(tiny.xml), config=F32).infer({"data": tiny.input(1)})
    np.testing.assert_allclose(out["prob"], tiny.reference(tiny.input(1)), rtol=1e-4, atol=1e-6)
    with IECore(policy="existing", endpoint=endpoint) as ie:  # the endpoint named: the key found the same way
        assert ie.daemon_pid() == _record(fresh_runtime)["pid"]
    assert run_mo("daemon", "stop").returncode == 0
    # a daemon started by hand on loopback tcp without a key refuses to start
    direct = subprocess.run([sys.executable, "-m", "device_daemons.cpu", "--endpoint", "tcp://127.0.0.1:*",
                             "--no-record"], capture_output=True, text=True, timeout=60)
    assert direct.returncode == 1 and "every local user can reach a tcp port (loopback too)" in direct.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("endpoint", ["tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://192.0.2.1:5555"])
def test_non_loopback_tcp_without_key_is_refused(fresh_runtime, endpoint):
    proc = run_mo("daemon", "start", "--endpoint", endpoint)
    assert proc.returncode == 1
    assert proc.stderr.startswith("[ ERROR ]"), proc.stderr
    assert "key" in proc.stderr and "Traceback" not in proc.stderr
    assert daemon_processes(fresh_runtime) == []
    # the daemon itself refuses too, whoever starts it
    direct = subprocess.run([sys.executable, "-m", "device_daemons.cpu", "--endpoint", endpoint, "--no-record"],
                            capture_output=True, text=True, timeout=60)
    assert direct.returncode == 1 and "without an authentication key" in direct.stderr


@pytest.mark.timeout(120)
def test_non_loopback_tcp_with_key_file(fresh_runtime, tiny, tmp_path):
    from core.microkernel import create_key_file
    from device_daemons.client import DaemonError, IECore
    key_file = str(tmp_path / "daemon.key")
    create_key_file(key_file)
    proc = run_mo("daemon", "start", "--endpoint", "tcp://0.0.0.0:*", "--key-file", key_file)
    assert proc.returncode == 0, proc.stderr
    rec = _record(fresh_runtime)
    assert rec["key_file"] == key_file and rec["endpoint"].startswith("tcp://0.0.0.0:")
    endpoint = rec["endpoint"]
    # found through the record (which names the key file); a non-loopback endpoint is
    # treated as remote: the IR content travels, arrays as frames
    x = tiny.input(2)
    with IECore(policy="existing") as ie:
        exec_net = ie.load_network(ie.read_network(tiny.xml), config=F32)
        np.testing.assert_allclose(exec_net.infer({"data": x})["prob"], tiny.reference(x), rtol=1e-4, atol=1e-6)
        assert exec_net._loaded[0].slots.ok is False
    # explicitly, as a client on another machine would
    with IECore(endpoint=endpoint, key_file=key_file) as ie:
        out = ie.load_network(ie.read_network(tiny.xml), config=F32).infer({"data": x})
        np.testing.assert_allclose(out["prob"], tiny.reference(x), rtol=1e-4, atol=1e-6)
    with IECore(endpoint=endpoint) as ie:  # this user's daemon there: its record names the key
        assert ie.daemon_pid() == rec["pid"]
    assert run_mo("daemon", "stop").returncode == 0
    assert wait_until(lambda: not daemon_processes(fresh_runtime), 5)
    with pytest.raises(DaemonError, match="key"):
        IECore(endpoint=endpoint)  # no key, and no record of this user's names one: refused before connecting


@pytest.mark.timeout(60)
def test_unknown_device(fresh_runtime):
    proc = run_mo("daemon", "start", "--device", "TPU")
    assert proc.returncode == 1
    assert "[ ERROR ]" in proc.stderr and "unknown device 'TPU'" in proc.stderr and "CPU" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.timeout(60)
def test_stale_records_are_removed(fresh_runtime):
    from device_daemons import registry
    from device_daemons.service.record import write_record
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    write_record("CPU", dead.pid, "ipc:///nonexistent.sock")
    path = registry.record_path("CPU")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert registry.read_record("CPU") is None
    assert not os.path.exists(path)
    # a live process that is not a daemon (a reused pid): stale too
    write_record("CPU", os.getpid(), "ipc:///nonexistent.sock")
    assert registry.read_record("CPU") is None and not os.path.exists(path)
    # garbage in the file: stale
    with open(path, "w") as f:
        f.write("{not json")
    assert registry.list_records() == [] and not os.path.exists(path)


@pytest.mark.timeout(120)
def test_concurrent_auto_starts_make_one_daemon(fresh_runtime, tiny):
    """Four processes with the auto policy find no daemon at once: one daemon starts."""
    script = ("from device_daemons.client import IECore\n"
              "ie = IECore()\n"
              "print(ie.daemon_pid())\n")
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    pids = set()
    for p in procs:
        out, err = p.communicate(timeout=90)
        assert p.returncode == 0, err
        pids.add(int(out.split()[-1]))
    assert len(pids) == 1
    assert daemon_processes(fresh_runtime) == [pids.pop()]


@pytest.fixture(scope="module")
def other_build(tmp_path_factory):
    """A copy of this checkout's code with one line added: another build of mo-core
    (as a checkout changed, or an upgrade, after a daemon started)."""
    root = tmp_path_factory.mktemp("other-build")
    for package in ("cli", "core", "ir", "device_daemons", "fallback_workers"):
        shutil.copytree(os.path.join(REPO, package), root / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    with open(root / "device_daemons" / "cpu" / "__init__.py", "a") as f:
        f.write("# another build\n")
    return str(root)


def _start_from(checkout: str, *options) -> int:
    """`mo-core daemon start [options]` run by the code of `checkout`: the daemon's pid."""
    proc = subprocess.run([sys.executable, "-m", "cli", "daemon", "start", *options], capture_output=True, text=True,
                          cwd=checkout, env=dict(os.environ, PYTHONPATH=checkout), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return int(re.search(r"pid (\d+)", proc.stdout).group(1))


@pytest.mark.timeout(180)
def test_an_idle_daemon_of_another_build_is_replaced(fresh_runtime, tiny, other_build, capfd):
    from device_daemons import registry
    from device_daemons.client import IECore
    old = _start_from(other_build, "--threads", "3", "--caffe-fallback")
    rec = _record(fresh_runtime)
    assert rec["pid"] == old and rec["build"] != registry.build_id()
    status = run_mo("daemon", "status")
    assert f"CPU daemon (pid {old}) runs another build" in status.stdout
    again = run_mo("daemon", "start")
    assert f"already running: pid {old}" in again.stdout and "another build" in again.stdout

    ie = IECore()  # "auto": the old daemon holds no network, so it is replaced
    try:
        x = tiny.input(0)
        assert_close(ie.load_network(ie.read_network(tiny.xml), "CPU", config=F32).infer({"data": x})["prob"],
                     tiny.reference(x))
        new = ie.daemon_pid()
    finally:
        ie.close()
    assert new != old
    assert _record(fresh_runtime)["build"] == registry.build_id()
    # the replacement got the options the old one was started with
    with open(f"/proc/{new}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert b"--caffe-fallback" in argv and argv[argv.index(b"--threads") + 1] == b"3", argv
    assert wait_until(lambda: daemon_processes(fresh_runtime) == [new], 10)
    assert f"CPU daemon (pid {old}) runs another build of mo-core" in capfd.readouterr().err


@pytest.mark.timeout(180)
def test_a_busy_daemon_of_another_build_keeps_serving_with_a_warning(fresh_runtime, tiny, other_build,
                                                                     capfd):
    from device_daemons.client import IECore
    old = _start_from(other_build)
    ie = IECore(policy="existing")  # never replaces: it uses the one that runs, and says so
    try:
        ie.load_network(ie.read_network(tiny.xml), "CPU").infer({"data": tiny.input(0)})
        assert ie.daemon_pid() == old
        assert "the policy is 'existing'" in capfd.readouterr().err
        # an "auto" client now finds it holding a network: it is left serving, with a warning
        script = ("from device_daemons.client import IECore\n"
                  "ie = IECore()\n"
                  "print(ie.daemon_pid())\n")
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90,
                              env=dict(os.environ, PYTHONPATH=REPO))
        assert proc.returncode == 0, proc.stderr
        assert int(proc.stdout.split()[-1]) == old
        assert "[ WARNING ]" in proc.stderr and "because it holds networks" in proc.stderr
    finally:
        ie.close()
    assert daemon_processes(fresh_runtime) == [old]


@pytest.mark.timeout(120)
def test_a_daemon_whose_record_was_lost_gives_way_to_the_new_one(fresh_runtime):
    """A damaged record: the next start cannot see the running daemon and starts another; the
    first used to run on unmanaged (no 'daemon stop' could find it). It sees the record name
    the other and stops."""
    assert run_mo("daemon", "start").returncode == 0
    first = _record(fresh_runtime)["pid"]
    with open(os.path.join(fresh_runtime, "daemon-cpu.json"), "w") as f:
        f.write("{damaged")
    assert run_mo("daemon", "start").returncode == 0
    second = _record(fresh_runtime)["pid"]
    assert second != first
    assert wait_until(lambda: first not in daemon_processes(fresh_runtime), 15)
    with open(os.path.join(fresh_runtime, "daemon-cpu.log")) as f:
        assert f"now pid {second} (this one's record was lost); exiting" in f.read()
    assert run_mo("daemon", "stop").returncode == 0
    assert wait_until(lambda: not daemon_processes(fresh_runtime), 10)


@pytest.mark.timeout(120)
def test_a_client_on_loopback_tcp_outlives_a_restart_of_its_daemon(fresh_runtime, tiny):
    """The start's key is kept across restarts at that endpoint: a client that signed for the
    first daemon signs for the next (a new key each start left it waiting out its timeout, its
    messages dropped as unsigned)."""
    import socket
    from device_daemons.client import IECore
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        endpoint = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    assert run_mo("daemon", "start", "--endpoint", endpoint).returncode == 0
    key_file = _record(fresh_runtime)["key_file"]
    with open(key_file, "rb") as f:
        key = f.read()
    x = tiny.input(4)
    with IECore(endpoint=endpoint, timeout=20) as ie:
        exec_net = ie.load_network(ie.read_network(tiny.xml), config=F32)
        assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x))
        assert run_mo("daemon", "stop").returncode == 0
        assert run_mo("daemon", "start", "--endpoint", endpoint).returncode == 0
        with open(key_file, "rb") as f:
            assert f.read() == key
        again = ie.load_network(ie.read_network(tiny.xml), config=F32)
        assert_close(again.infer({"data": x})["prob"], tiny.reference(x))
    assert run_mo("daemon", "stop").returncode == 0
