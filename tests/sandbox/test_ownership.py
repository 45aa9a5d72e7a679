"""Ownership and connections (issue 21): network handles are unguessable (random
62-bit), so a client can no longer unload another's network by counting; the sockets
of sandboxed workers whose launcher died are removed at the next launch; one process's
idle connections to the local carrier cannot shut the other clients out (F5)."""
from __future__ import annotations

import os

import pytest

from core.microkernel import Client, RemoteError, runtime_dir
from tests.daemon.conftest import F32, private_runtime

pytestmark = pytest.mark.timeout(120)


def test_handles_are_unguessable(tiny):
    from device_daemons.client import daemon
    with private_runtime("own-"):
        launch = daemon.launch("CPU", threads=1)
        with Client(launch.record["endpoint"], timeout=30) as client:
            mine = client.call("load_network", {"xml": tiny.xml})[0]["handle"]
            theirs = client.call("load_network", {"xml": tiny.xml})[0]["handle"]
            assert mine != theirs and min(mine, theirs) > 1 << 32, (mine, theirs)
            for guess in (theirs - 1, theirs + 1, mine + 1, 1, 2):
                if guess in (mine, theirs):
                    continue
                with pytest.raises(RemoteError) as err:
                    client.call("unload", {"handle": guess})
                assert err.value.kind == "handle"
            client.call("unload", {"handle": mine})
            client.call("unload", {"handle": theirs})
        daemon.stop("CPU", grace=2.0)


def test_a_dead_launchers_worker_directories_go_at_the_next_launch(tmp_path):
    from core.microkernel import WorkerProcess
    from core.microkernel.sandbox import Sandbox
    with private_runtime("own-"):
        dead = os.path.join(runtime_dir(), "w999999999-tf-0badc0de")  # (no such pid)
        os.mkdir(dead, 0o700)
        open(os.path.join(dead, "tf.sock"), "w").close()
        worker = WorkerProcess("tests.sandbox.escape_worker", name="escape", startup_timeout=60, sandbox=Sandbox())
        try:
            worker.start()
            assert not os.path.exists(dead)
            own = os.path.dirname(worker.endpoint[len("ipc://"):])
            assert os.path.isdir(own)
        finally:
            worker.stop()
        assert not os.path.exists(own)


HOG = r"""
import select, socket, sys, time
path, n = sys.argv[1], int(sys.argv[2])
held = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
    except OSError:
        s.close()
        continue
    held.append(s)
time.sleep(1.0)
closed = select.select(held, [], [], 0)[0]  # (a connection the server closed reads its end)
print(len(held), len(held) - len(closed), flush=True)
time.sleep(120)
"""


def test_idle_connections_of_one_process_do_not_shut_out_the_others(tiny):
    """F5: a local process holding 300 idle connections to the local carrier's Unix socket.
    It gets MAX_PER_PEER of them (the rest are closed unanswered); another client's
    requests - on a connection of its own, or over ZeroMQ where the carrier is full -
    get correct results."""
    import subprocess
    import sys

    from core.microkernel import direct
    from device_daemons.client import IECore
    from tests.daemon.conftest import assert_close
    with private_runtime("f5-"):
        ie = IECore(policy="auto")
        net = ie.load_network(ie.read_network(model=tiny.xml), "CPU", config=F32)
        x = tiny.input(3)
        assert_close(net.infer({"data": x})["prob"], tiny.reference(x))
        from device_daemons import registry
        with Client(registry.read_record("CPU")["endpoint"], timeout=30) as client:
            path = client.call("hello")[0]["direct"]["path"]
        hog = subprocess.Popen([sys.executable, "-c", HOG, path, "300"], stdout=subprocess.PIPE, text=True)
        try:
            made, served = (int(n) for n in hog.stdout.readline().split())
            assert made == 300 and served <= direct.MAX_PER_PEER, (made, served)
            for seed in range(20):
                x = tiny.input(seed)
                assert_close(net.infer({"data": x})["prob"], tiny.reference(x))
            fresh = IECore(policy="auto")  # a new client (new connections) after the flood
            other = fresh.load_network(fresh.read_network(model=tiny.xml), "CPU", config=F32)
            for seed in range(5):
                x = tiny.input(seed)
                assert_close(other.infer({"data": x})["prob"], tiny.reference(x))
            other.close()
        finally:
            hog.kill()
            hog.wait()
        net.close()


CLIENT = r"""
import os, signal, sys
import numpy as np
from device_daemons.client import IECore
ie = IECore(policy="existing")
net = ie.load_network(ie.read_network(model=sys.argv[1]), "CPU", config={"INFERENCE_PRECISION_HINT": "f32"})
for _ in range(3):
    net.infer({"data": np.zeros((1, 3, 16, 16), np.float32)})
print("ready", flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # dies holding its slots
"""


def test_a_dead_clients_slots_go_at_the_next_request(tiny):
    """A client killed with its shared-memory slots: the daemon frees them (and the
    bindings on them) at the next slot request, not at LRU eviction."""
    import subprocess
    import sys

    from device_daemons import registry
    from device_daemons.client import IECore
    from device_daemons.shm_protocol import MEMFD_PREFIX
    from tests.support import REPO
    with private_runtime("own-"):
        ie = IECore(policy="auto")
        ie.load_network(ie.read_network(model=tiny.xml), "CPU", config=F32).close()  # (starts the daemon)
        pid = registry.read_record("CPU")["pid"]

        def slots():
            """The daemon's slots: its memfds of that name (each slot's name once)."""
            names = set()
            for fd in os.listdir("/proc/{}/fd".format(pid)):
                try:
                    names.add(os.readlink("/proc/{}/fd/{}".format(pid, fd)))
                except OSError:
                    pass
            return sum(1 for n in names if n.startswith("/memfd:" + MEMFD_PREFIX))
        before = slots()
        proc = subprocess.run([sys.executable, "-c", CLIENT, tiny.xml], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=REPO))
        assert "ready" in proc.stdout and proc.returncode == -9, proc.stderr
        assert slots() > before  # what it left
        net = ie.load_network(ie.read_network(model=tiny.xml), "CPU", config=F32)
        x = tiny.input(5)
        from tests.daemon.conftest import assert_close
        assert_close(net.infer({"data": x})["prob"], tiny.reference(x))  # its slot request reaps the dead one's
        assert slots() == before + 1  # ours; the dead client's went
        net.close()


def test_a_killed_daemons_socket_files_go_with_its_record(tiny):
    import signal

    from device_daemons import registry
    from device_daemons.client import daemon
    from tests.support import wait_until
    with private_runtime("own-"):
        launch = daemon.launch("CPU", threads=1)
        sock = launch.record["endpoint"][len("ipc://"):]
        files = [p for p in (sock, sock + ".direct") if os.path.exists(p)]
        assert sock in files and len(files) == 2, files
        os.kill(launch.record["pid"], signal.SIGKILL)
        assert wait_until(lambda: registry.read_record("CPU") is None, 30)
        assert [p for p in files if os.path.exists(p)] == []
