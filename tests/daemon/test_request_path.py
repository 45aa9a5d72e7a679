"""Which way a request travels (device_daemons/client/request_path.py decides): a
local client's requests - synchronous, an InferRequest's, asynchronous - take the
daemon's local carrier (bound requests over its Unix socket); the fallback (infer
over ZeroMQ, arrays as frames) takes them when the carrier is unavailable (shared
memory turned off, its socket gone, a connection it refuses, a daemon on tcp) or
does not take them
(per-layer counts); a request that fails on the carrier reports its error there,
once. Real daemons, results against pycaffe."""
from __future__ import annotations

import os

import numpy as np
import pytest

from device_daemons.client import IECore, InferenceError, StatusCode
from tests.daemon.conftest import F32, assert_close, run_mo, write_custom_ir, write_text

pytestmark = pytest.mark.timeout(120)

# y = x + 1, a failure for a negative first value (the bound request fails; the fallback says why)
PICKY_KERNEL = '''
class PickyOp:
    type = "PickyOp"

    def __init__(self, layer):
        self.layer = layer

    def getMemoryShapes(self, input_shapes):
        return [tuple(input_shapes[0])]

    def forward(self, inputs):
        if float(inputs[0].flat[0]) < 0:
            raise ValueError("PickyOp takes no negative first value")
        return [inputs[0] + 1]
'''


def status(exec_net) -> dict:
    return exec_net.link.call("status")[0]


def run_some(exec_net, tiny, seeds=range(4)):
    for seed in seeds:
        x = tiny.input(seed)
        assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x))


def new_client_takes_the_fallback(tiny):
    """A new client (its threads connect afresh) whose carrier cannot be had: its
    requests run over ZeroMQ, correct, and it stops trying the carrier."""
    with IECore() as ie:
        ie.set_config(F32, "CPU")  # the results are compared with pycaffe to 1e-4
        exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU")
        before = status(exec_net)
        run_some(exec_net, tiny)
        after = status(exec_net)
        assert after["requests"] - before["requests"] == 4 and after["local_requests"] == before["local_requests"]
        assert not exec_net._loaded[0].carrier.direct_usable


def test_a_local_client_takes_the_local_carrier(fresh_runtime, tiny):
    with IECore() as ie:
        ie.set_config(F32, "CPU")  # the results are compared with pycaffe to 1e-4
        exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU")
        run_some(exec_net, tiny)
        x = tiny.input(7)
        assert_close(exec_net.requests[0].infer({"data": x})["prob"], tiny.reference(x))
        requests = [exec_net.start_async({"data": tiny.input(s)}) for s in (8, 9)]
        for s, req in zip((8, 9), requests):
            assert req.wait() == StatusCode.OK
            assert_close(req.outputs["prob"], tiny.reference(tiny.input(s)))
        st = status(exec_net)
        assert st["requests"] == st["local_requests"] == 7
        assert st["bindings"] >= 1
        assert exec_net._loaded[0].carrier is not None


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_without_shared_memory_every_request_takes_the_fallback(fresh_runtime, tiny, monkeypatch, how):
    if how == "environment":
        monkeypatch.setenv("MO_CORE_SHM", "0")
    with IECore(**({"shared_memory": False} if how == "argument" else {})) as ie:
        ie.set_config(F32, "CPU")  # the results are compared with pycaffe to 1e-4
        exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU")
        run_some(exec_net, tiny)
        st = status(exec_net)
        assert st["requests"] == 4 and st["local_requests"] == 0 and st["bindings"] == 0
        assert exec_net._loaded[0].carrier is None


def test_a_carrier_that_cannot_be_reached_leaves_the_fallback(fresh_runtime, tiny):
    """The daemon names a Unix socket that is gone (a client that cannot connect to it):
    the requests still run, over ZeroMQ, and the client stops trying the socket."""
    with IECore() as ie:
        ie.set_config(F32, "CPU")  # the results are compared with pycaffe to 1e-4
        first = ie.load_network(ie.read_network(tiny.xml), "CPU")
        run_some(first, tiny, [0])
        path = first.link.call("hello")[0]["direct"]["path"]
        os.unlink(path)  # (the daemon's listening socket stays open; nobody can connect any more)
    new_client_takes_the_fallback(tiny)


def test_a_carrier_that_refuses_the_connection_leaves_the_fallback(fresh_runtime, tiny):
    """This process holds as many connections to the carrier as one process may
    (direct.MAX_PER_PEER, by SO_PEERCRED): a new client's connection is closed
    unanswered, and its requests run over ZeroMQ, correct, not one failed."""
    import socket

    from core.microkernel import direct
    with IECore() as ie:
        ie.set_config(F32, "CPU")  # the results are compared with pycaffe to 1e-4
        first = ie.load_network(ie.read_network(tiny.xml), "CPU")
        path = first.link.call("hello")[0]["direct"]["path"]
    held = []
    try:
        for _ in range(direct.MAX_PER_PEER):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sock.connect(path)
            held.append(sock)
        new_client_takes_the_fallback(tiny)
    finally:
        for sock in held:
            sock.close()


def test_a_daemon_on_tcp_has_no_carrier(fresh_runtime, tiny):
    assert run_mo("daemon", "start", "--endpoint", "tcp://127.0.0.1:*").returncode == 0
    with IECore(policy="existing") as ie:
        ie.set_config(F32, "CPU")  # the results are compared with pycaffe to 1e-4
        exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU")
        run_some(exec_net, tiny)
        st = status(exec_net)
        assert st["requests"] == 4 and st["local_requests"] == 0
        assert exec_net._loaded[0].carrier is None
    assert run_mo("daemon", "stop").returncode == 0


def test_per_layer_counts_take_the_fallback(fresh_runtime, tiny):
    with IECore() as ie:
        ie.set_config(F32, "CPU")  # the results are compared with pycaffe to 1e-4
        exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU", config={"PERF_COUNT": "YES"})
        request = exec_net.requests[0]
        x = tiny.input(3)
        assert_close(request.infer({"data": x})["prob"], tiny.reference(x))
        assert request.get_perf_counts()  # the rows came with the reply
        st = status(exec_net)
        assert st["requests"] == 1 and st["local_requests"] == 0


def test_a_request_that_fails_on_the_carrier_says_why_and_runs_once(fresh_runtime, tmp_path):
    kernel = write_text(str(tmp_path / "picky.py"), PICKY_KERNEL)
    xml = write_custom_ir(str(tmp_path / "picky"), "PickyOp")
    with IECore() as ie:
        ie.set_config(F32, "CPU")  # the results are compared with pycaffe to 1e-4
        ie.add_extension(kernel, "CPU")
        exec_net = ie.load_network(ie.read_network(xml), "CPU")
        good = np.arange(4, dtype=np.float32).reshape(1, 4)
        np.testing.assert_array_equal(exec_net.infer({"data": good})["custom1"], good + 1)
        with pytest.raises(InferenceError, match="takes no negative first value") as err:
            exec_net.infer({"data": -good - 1})  # the error of the bound request, as infer's
        assert err.value.kind == "kernel"
        np.testing.assert_array_equal(exec_net.infer({"data": good})["custom1"], good + 1)
        st = status(exec_net)
        # the two good requests on the carrier; the bad one failed there and was not sent again
        assert st["local_requests"] == 2 and st["requests"] == 2
