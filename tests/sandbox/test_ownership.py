"""Ownership (issue 21): network handles are unguessable (random 62-bit), so a client
can no longer unload another's network by counting; the sockets of sandboxed workers
whose launcher died are removed at the next launch."""
from __future__ import annotations

import os

import pytest

from core.microkernel import Client, RemoteError, runtime_dir
from tests.daemon.conftest import private_runtime

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
