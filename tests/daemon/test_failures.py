"""Failures: a daemon killed mid-request, timeouts, malformed messages, custom layers."""
from __future__ import annotations

import os
import signal
import time

import msgpack
import numpy as np
import pytest

from device_daemons.client import (DaemonDied, DaemonNotRunning, DaemonTimeout, IECore,
                                   InferenceError)
from tests.daemon.conftest import (F32, assert_close, daemon_processes, raw_reply, raw_socket, run_mo,
                                   slow_request_started, write_custom_ir)
from tests.support import call_in_thread

SLOW = np.full((1, 4), 110.0, np.float32)  # the SlowOp kernel sleeps 10 s on it
FAST = np.arange(4, dtype=np.float32).reshape(1, 4)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["async", "sync"])
def test_daemon_killed_during_a_request(fresh_runtime, slow_model, mode, tmp_path, monkeypatch):
    xml, kernel = slow_model
    monkeypatch.setenv("MO_CORE_TEST_SIGNAL_DIR", str(tmp_path))  # for the daemon started below
    ie = IECore(policy="auto", timeout=60)
    assert ie.add_extension(kernel, "CPU") == ["SlowOp"]
    exec_net = ie.load_network(ie.read_network(xml), "CPU")
    np.testing.assert_array_equal(exec_net.infer({"data": FAST})["custom1"], FAST * 2 + 1)
    pid = ie.daemon_pid()
    assert daemon_processes(fresh_runtime) == [pid]

    th, outcome = call_in_thread((lambda: exec_net.start_async({"data": SLOW}).wait()) if mode == "async" else
                                 (lambda: exec_net.infer({"data": SLOW})))
    assert slow_request_started(str(tmp_path))  # the request is in the kernel's sleep now
    os.kill(pid, signal.SIGKILL)
    th.join(20)
    assert not th.is_alive()
    err = outcome.get("error")
    assert isinstance(err, DaemonDied), outcome
    assert outcome["seconds"] < 5  # well within the 60 s timeout (the kernel sleeps 10 s)
    text = str(err)
    assert f"pid {pid}" in text and "killed by signal SIGKILL" in text and "'infer'" in text
    assert "next request starts a new daemon" in text

    # the next request starts a new daemon and loads the network (and kernels) again
    out = exec_net.infer({"data": FAST})
    np.testing.assert_array_equal(out["custom1"], FAST * 2 + 1)
    new_pid = ie.daemon_pid()
    assert new_pid != pid
    assert daemon_processes(fresh_runtime) == [new_pid]
    ie.close()


@pytest.mark.timeout(120)
def test_daemon_killed_with_existing_policy(fresh_runtime, slow_model, tmp_path, monkeypatch):
    xml, kernel = slow_model
    monkeypatch.setenv("MO_CORE_TEST_SIGNAL_DIR", str(tmp_path))  # for the daemon started below
    assert run_mo("daemon", "start").returncode == 0
    ie = IECore(policy="existing", timeout=60)
    ie.add_extension(kernel)
    exec_net = ie.load_network(ie.read_network(xml))
    pid = ie.daemon_pid()
    req = exec_net.start_async({"data": SLOW})
    assert slow_request_started(str(tmp_path))
    os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(DaemonDied, match="mo-core daemon start") as err:
        req.wait()
    assert time.monotonic() - t0 < 5
    assert f"pid {pid}" in str(err.value)
    with pytest.raises(DaemonNotRunning, match="mo-core daemon start"):
        exec_net.infer({"data": FAST})
    # once someone starts one again, the same exec_net works again
    assert run_mo("daemon", "start").returncode == 0
    np.testing.assert_array_equal(exec_net.infer({"data": FAST})["custom1"], FAST * 2 + 1)
    assert ie.daemon_pid() != pid


@pytest.mark.timeout(120)
def test_timeout_is_a_clear_error(slow_model):
    xml, kernel = slow_model
    ie = IECore(timeout=1.5)
    ie.add_extension(kernel)
    exec_net = ie.load_network(ie.read_network(xml))
    t0 = time.monotonic()
    with pytest.raises(DaemonTimeout, match=r"within 1.5 s.*still running") as err:
        exec_net.infer({"data": SLOW})
    assert 1.4 < time.monotonic() - t0 < 4
    assert isinstance(err.value, TimeoutError)
    # the daemon goes on serving (the slow request keeps one worker busy meanwhile)
    np.testing.assert_array_equal(exec_net.infer({"data": FAST})["custom1"], FAST * 2 + 1)
    with pytest.raises(DaemonTimeout):
        exec_net.start_async({"data": SLOW}).wait()
    ie.close()


@pytest.mark.timeout(120)
def test_malformed_messages_get_an_error_or_are_dropped(tiny):
    ie = IECore()
    exec_net = ie.load_network(ie.read_network(tiny.xml), config=F32)  # compared with pycaffe to 1e-4
    endpoint = exec_net._loaded[0].endpoint
    handle = exec_net._loaded[1]
    pid = ie.daemon_pid()
    sock = raw_socket(endpoint)
    try:
        # not msgpack at all, and no recoverable id: dropped
        sock.send_multipart([b"\xc1\xff garbage \x00", b"more"])
        sock.send_multipart([b""])
        # a header declaring a huge array (1 TiB) backed by 16 bytes: error reply
        huge = {"v": 1, "id": 77, "op": "infer", "args": {"handle": handle, "inputs": {"data": {"$array": 0}}},
                "arrays": [{"dtype": "<f4", "shape": [1 << 40]}]}
        sock.send_multipart([msgpack.packb(huge), b"\0" * 16])
        r = raw_reply(sock)
        assert r["id"] == 77 and r["ok"] is False and r["error"]["kind"] == "protocol"
        # shape/frame mismatch, bad dtype, wrong types: error replies
        for rid, header, frames in [
                (78, {"v": 1, "id": 78, "op": "infer", "args": {}, "arrays": [{"dtype": "<f4", "shape": [2]}]}, [b"\0"]),
                (79, {"v": 1, "id": 79, "op": "infer", "args": {}, "arrays": [{"dtype": "O", "shape": [1]}]}, [b"\0" * 8]),
                (80, {"v": 1, "id": 80, "op": 12, "args": {}}, []),
                (81, {"v": 2, "id": 81, "op": "ping"}, [])]:
            sock.send_multipart([msgpack.packb(header), *frames])
            r = raw_reply(sock)
            assert r is not None and r["id"] == rid and r["ok"] is False, r
        # well-formed but nonsense for the daemon's verbs: error replies naming the problem
        for rid, op, args, kind in [
                (90, "infer", {"handle": "x"}, "handle"),
                (91, "infer", {"handle": handle, "inputs": 5}, "input"),
                (92, "infer", {"handle": handle, "shm": b"\xc1"}, "input"),  # infer takes frames only
                (93, "infer_bind", {"handle": handle, "shm": b"\xc1"}, "unknown_op"),  # the local carrier's only
                (94, "shm_create", {"size": 0}, "shm"),
                (95, "shm_create", {"size": 1 << 40}, "shm"),
                (95, "shm_attach", {"path": "/etc/passwd", "size": 10}, "unknown_op"),  # the old verb
                (96, "load_network", {"xml": "/nonexistent/net.xml"}, "network"),
                (97, "load_network", {"xml_text": "<net", "bin_data": None}, "network"),
                (97, "load_network", {"xml": tiny.xml, "config": ["f32"]}, "network"),
                (97, "load_network", {"xml": tiny.xml, "config": {"INFERENCE_PRECISION_HINT": "fp8"}}, "network"),
                (97, "load_network", {"xml": tiny.xml, "config": {"INFERENCE_NUM_THREADS": -2}}, "network"),
                (97, "load_network", {"xml": tiny.xml, "config": {"CPU_BIND_THREAD": "YES"}}, "network"),
                (98, "reshape", {"handle": handle, "shapes": {"data": [0, -1]}}, "input"),
                (99, "no_such_verb", {}, "unknown_op")]:
            sock.send_multipart([msgpack.packb({"v": 1, "id": rid, "op": op, "args": args})])
            r = raw_reply(sock)
            assert r is not None and r["id"] == rid and r["ok"] is False, (op, r)
            assert r["error"]["kind"] == kind, (op, r)
        # still serving everybody
        sock.send_multipart([msgpack.packb({"v": 1, "id": 100, "op": "ping"})])
        assert raw_reply(sock)["ok"] is True
    finally:
        sock.close(0)
    x = tiny.input(9)
    assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x))
    assert ie.daemon_pid() == pid


@pytest.mark.timeout(120)
def test_unknown_layer_type_names_the_type_and_dash_l(tmp_path):
    xml = write_custom_ir(str(tmp_path / "mystery"), "MysteryOp", name="odd_layer")
    ie = IECore()
    with pytest.raises(InferenceError) as err:
        ie.load_network(ie.read_network(xml), "CPU")
    text = str(err.value)
    assert "MysteryOp" in text and "odd_layer" in text and "-l FILE" in text
    assert err.value.kind == "network"
    proc = run_mo("infer", "-m", xml)
    assert proc.returncode == 1
    assert "[ ERROR ]" in proc.stderr and "MysteryOp" in proc.stderr and "-l FILE" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.timeout(120)
def test_custom_kernel_with_dash_l(slow_model, tmp_path):
    xml, kernel = slow_model
    x = np.array([[1.0, -2.0, 3.5, 0.0]], np.float32)
    np.save(tmp_path / "x.npy", x)
    proc = run_mo("infer", "-m", xml, "-l", kernel, "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npz"))
    assert proc.returncode == 0, proc.stderr
    assert "Custom kernels from" in proc.stdout and "SlowOp" in proc.stdout
    assert "Output 'custom1': shape [1, 4]" in proc.stdout
    with np.load(tmp_path / "y.npz") as out:
        np.testing.assert_array_equal(out["custom1"], x * 2 + 1)


@pytest.mark.timeout(120)
def test_bad_custom_kernel_files(tmp_path, slow_model):
    xml, _ = slow_model
    ie = IECore()
    broken = tmp_path / "broken.py"
    broken.write_text("def oops(:\n")
    with pytest.raises(InferenceError, match="broken.py.*SyntaxError") as err:
        ie.add_extension(str(broken))
    assert err.value.kind == "kernel"
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(InferenceError, match="defines no kernel class"):
        ie.add_extension(str(empty))
    with pytest.raises(InferenceError, match="cannot find"):
        ie.add_extension(str(tmp_path / "missing.py"))
    failing = tmp_path / "failing.py"
    failing.write_text("class Bad:\n    type = 'SlowOp'\n    def __init__(self, layer): pass\n"
                       "    def getMemoryShapes(self, s): return [tuple(s[0])]\n"
                       "    def forward(self, inputs): raise RuntimeError('kaboom')\n")
    ie.add_extension(str(failing))
    exec_net = ie.load_network(ie.read_network(xml))
    with pytest.raises(InferenceError, match="kaboom") as err:
        exec_net.infer({"data": FAST})
    assert err.value.kind == "kernel"
    ie.close()
    # sys.exit() in a kernel's forward: the layer is named, on the local carrier and on the main socket alike
    exiting = tmp_path / "exiting.py"
    exiting.write_text(failing.read_text().replace("raise RuntimeError('kaboom')", "import sys; sys.exit(3)"))
    for shared_memory in (True, False):
        ie = IECore(shared_memory=shared_memory)
        ie.add_extension(str(exiting))
        exec_net = ie.load_network(ie.read_network(xml))
        with pytest.raises(InferenceError, match="layer 'custom1' .*forward failed: SystemExit: 3"):
            exec_net.infer({"data": FAST})
        ie.close()


@pytest.mark.timeout(60)
def test_no_daemon_left_by_cli_in_fresh_runtime(fresh_runtime, tiny):
    """`mo-core infer --no-auto-start` with no daemon: a clear error, nothing started."""
    proc = run_mo("infer", "-m", tiny.xml, "--no-auto-start")
    assert proc.returncode == 1
    assert "[ ERROR ]" in proc.stderr and "mo-core daemon start" in proc.stderr
    assert daemon_processes(fresh_runtime) == []


RELOADED_AND_LEFT = """
import os, signal, sys, time
import numpy as np
from device_daemons.client import IECore
ie = IECore()
exec_net = ie.load_network(ie.read_network(sys.argv[1]), "CPU")
x = np.zeros((1, 3, 16, 16), np.float32)
exec_net.infer({"data": x})
os.kill(ie.daemon_pid("CPU"), signal.SIGKILL)
time.sleep(0.5)
exec_net.infer({"data": x})  # a new daemon, the network loaded again there
print(ie.daemon_pid("CPU"))
"""  # (and exits without closing anything)


@pytest.mark.timeout(120)
def test_a_network_loaded_again_after_a_restart_is_unloaded_at_exit(fresh_runtime, tiny):
    """A client whose daemon was killed loads its network again on the new one; when it
    exits without closing, that load is unloaded too (at exit, the finalizer of a
    network must run before the new connection's client closes)."""
    import subprocess
    import sys
    from tests.support import REPO
    proc = subprocess.run([sys.executable, "-c", RELOADED_AND_LEFT, tiny.xml], capture_output=True, text=True,
                          timeout=90, env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 0, proc.stderr
    with IECore(policy="existing") as ie:
        status = ie._link("CPU").call("status")[0]
    assert status["pid"] == int(proc.stdout.split()[-1]) and status["networks"] == [], status["networks"]


LOADED_AND_KILLED = """
import os, signal, sys
from device_daemons.client import IECore
ie = IECore()
nets = [ie.load_network(ie.read_network(sys.argv[1]), "CPU") for _ in range(3)]
print(ie.daemon_pid("CPU"), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no finalizer, no unload
"""


@pytest.mark.timeout(120)
def test_the_networks_of_a_killed_client_are_unloaded(fresh_runtime, tiny):
    """A client killed with its networks loaded: they stayed in the daemon for its life (40
    networks: +500 MiB). Its pid came with each load; once it has ended, the daemon's next
    load or status unloads them. Another client's network stays."""
    import subprocess
    import sys
    from tests.support import REPO
    with IECore(policy="auto") as ie:
        mine = ie.load_network(ie.read_network(tiny.xml), "CPU", config=F32)
        proc = subprocess.run([sys.executable, "-c", LOADED_AND_KILLED, tiny.xml], capture_output=True, text=True,
                              timeout=90, env=dict(os.environ, PYTHONPATH=REPO))
        assert proc.returncode == -signal.SIGKILL and int(proc.stdout.split()[0]) == ie.daemon_pid(), proc.stderr
        status = ie._link("CPU").call("status")[0]
        assert [n["handle"] for n in status["networks"]] == [mine._loaded[1]], status["networks"]
        assert_close(mine.infer({"data": tiny.input(3)})["prob"], tiny.reference(tiny.input(3)))


FORKED = """
import os, sys
import numpy as np
from device_daemons.client import DaemonError, IECore
ie = IECore(timeout=20)
exec_net = ie.load_network(ie.read_network(sys.argv[1]), "CPU")
x = np.zeros((1, 3, 16, 16), np.float32)
exec_net.infer({"data": x})
pid = os.fork()
if pid == 0:
    try:
        exec_net.infer({"data": x})
        print("child: no error")
    except DaemonError as exc:
        print("child:", exc)
    os._exit(0)
os.waitpid(pid, 0)
print("parent:", sorted(exec_net.infer({"data": x})))
"""


@pytest.mark.timeout(120)
def test_a_forked_child_gets_a_clear_error_not_a_hang(fresh_runtime, tiny):
    """ZeroMQ sockets and the client's threads do not survive fork: a child using its parent's
    IECore hung for good; it gets an error saying so, and the parent goes on."""
    import subprocess
    import sys
    from tests.support import REPO
    proc = subprocess.run([sys.executable, "-c", FORKED, tiny.xml], capture_output=True, text=True, timeout=90,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 0, proc.stderr
    assert "child: this process (pid" in proc.stdout and "was forked from pid" in proc.stdout, proc.stdout
    assert "parent: ['prob']" in proc.stdout, proc.stdout
