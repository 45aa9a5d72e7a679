"""Bound requests (device_daemons/bound_protocol.py), how a local client's requests
travel on the daemon's local carrier: bound to a shared-memory slot once, then sent
as 8-byte raw datagrams. Against a real daemon and pycaffe: results stay right
request after request, outputs a caller keeps are never overwritten, anything the
bound path cannot take goes the plain way (with the plain path's errors), a daemon
that drops a binding or dies costs nothing but a re-bind. The daemon's side is also
exercised in-process (statuses, the table). Which way a request takes:
test_request_path.py."""
from __future__ import annotations

import os
import signal
import struct
import time

import msgpack
import numpy as np
import pytest

from device_daemons import bound_protocol as bound
from device_daemons.client.bound_client import MAX_BINDINGS
from device_daemons.service.bound_table import Binding, BoundTable
from device_daemons.client import DaemonDied, IECore, InferenceError
from tests.daemon.conftest import F32, assert_close, daemon_processes

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def fast_net(fresh_runtime, tiny):
    """The tiny net loaded on a daemon of this test."""
    ie = IECore()
    exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU", config=F32)  # compared with pycaffe to 1e-4
    yield ie, exec_net
    ie.close()


def status(exec_net) -> dict:
    return exec_net.link.call("status")[0]


def test_requests_are_bound_once_then_raw(fast_net, tiny):
    ie, exec_net = fast_net
    before = status(exec_net)
    for seed in range(1, 21):
        x = tiny.input(seed)
        assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x))
    after = status(exec_net)
    assert after["bindings"] == 1
    assert after["local_requests"] - before["local_requests"] == 20
    assert after["requests"] - before["requests"] == 20
    # an InferRequest's synchronous infer takes the same path
    x = tiny.input(99)
    assert_close(exec_net.requests[0].infer({"data": x})["prob"], tiny.reference(x))
    assert status(exec_net)["local_requests"] == after["local_requests"] + 1


def test_outputs_kept_are_never_overwritten(fast_net, tiny):
    ie, exec_net = fast_net
    before = status(exec_net)["local_requests"]
    kept = []
    for seed in range(1, MAX_BINDINGS + 4):  # more than the lending bindings: the last ones are copies
        x = tiny.input(seed)
        kept.append((x, exec_net.infer({"data": x})))
    for x, out in kept:
        assert_close(out["prob"], tiny.reference(x))
    lent = [out["prob"] for _, out in kept[:MAX_BINDINGS]]
    assert all(not p.flags.owndata for p in lent)  # views of their slots
    assert all(out["prob"].flags.owndata for _, out in kept[MAX_BINDINGS:])  # copied out of one more binding
    assert status(exec_net)["bindings"] == MAX_BINDINGS + 1
    assert status(exec_net)["local_requests"] - before == MAX_BINDINGS + 3  # all on the local carrier
    del out, lent
    kept.clear()  # all slots free again: no new binding
    for seed in range(50, 60):
        x = tiny.input(seed)
        assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x))
    assert status(exec_net)["bindings"] == MAX_BINDINGS + 1


def test_what_the_binding_does_not_fit_goes_the_plain_way(fast_net, tiny):
    ie, exec_net = fast_net
    with pytest.raises(InferenceError, match="data"):  # the plain path's error, not a raw status
        exec_net.infer({"data": np.zeros((1, 3, 8, 8), np.float32)})
    with pytest.raises(InferenceError, match="nope"):
        exec_net.infer({"nope": tiny.input(1)})
    x = tiny.input(3).astype(np.float64)  # converted to float32 first, then bound as usual
    assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x.astype(np.float32)))


def test_a_binding_the_daemon_dropped_is_bound_again(fast_net, tiny):
    ie, exec_net = fast_net
    x = tiny.input(5)
    exec_net.infer({"data": x})
    bound_requests = exec_net.bound
    (b,) = bound_requests._free
    exec_net.link.call("shm_detach", {"slot": b.slot.id})  # the daemon forgets the slot and its binding
    assert status(exec_net)["bindings"] == 0
    before = status(exec_net)["local_requests"]
    assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x))  # BOUND_UNKNOWN: bound again at once
    assert status(exec_net)["bindings"] == 1 and status(exec_net)["local_requests"] == before + 1
    exec_net.close()  # unloading drops its bindings
    assert status(exec_net)["bindings"] == 0


def test_a_daemon_killed_between_requests(fast_net, tiny, fresh_runtime):
    ie, exec_net = fast_net
    x = tiny.input(6)
    exec_net.infer({"data": x})
    pid = ie.daemon_pid()
    os.kill(pid, signal.SIGKILL)
    for _ in range(100):
        if not daemon_processes(fresh_runtime):
            break
        time.sleep(0.05)
    try:  # the request that finds it gone either says so or has already restarted it
        out = exec_net.infer({"data": x})
        assert_close(out["prob"], tiny.reference(x))
    except DaemonDied as err:
        assert f"pid {pid}" in str(err)
    for seed in range(3):  # then bound requests on the new daemon
        x = tiny.input(seed)
        assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x))
    assert status(exec_net)["local_requests"] >= 3
    assert ie.daemon_pid() != pid
    assert daemon_processes(fresh_runtime) == [ie.daemon_pid()]


# ------------------------------------------------------------------ the daemon's side, in-process

@pytest.fixture
def daemon(tiny):
    from device_daemons.cpu.server import CpuDaemon
    d = CpuDaemon(threads=1)
    handle = d.load_network({"xml": tiny.xml, "config": F32}, [])["handle"]
    slot = d.shm_create({"size": 1 << 16}, [])["slot"]
    spec = msgpack.packb({"slot": slot, "inputs": {"data": [0, [1, 3, 16, 16]]}, "out": [3072, (1 << 16) - 3072]})
    yield d, handle, slot, spec
    d.cleanup()


def run_bound(d, bid) -> tuple[int, int]:
    reply = d.infer_bound(bound.REQUEST.pack(bid))
    if isinstance(reply, tuple):  # (reply, then): then() runs after the reply is sent, as the server does
        reply, then = reply
        then()
    return bound.check_reply(reply)[:2]


def test_daemon_statuses(daemon, tiny):
    d, handle, slot, spec = daemon
    result = d.infer_bind(bound.bind_request(handle, spec), [])
    bid, outputs = bound.check_bind_result(result, 1 << 16)
    assert outputs == [("prob", 3072, (1, 10))]
    b = d.bindings.get(bid)
    x = tiny.input(4)
    b.inputs["data"][...] = x
    status, compute_us = run_bound(d, bid)
    assert status == bound.BOUND_OK and compute_us > 0
    assert_close(b.outputs["prob"], tiny.reference(x))
    assert run_bound(d, bid + 1)[0] == bound.BOUND_UNKNOWN
    status, _, _, error = bound.check_reply(d.infer_bound(b"short"))
    assert status == bound.BOUND_FAILED and error.kind == "input" and "8 bytes" in error.message
    b.inputs["data"][...] = np.nan  # still computes (NaN in, NaN out): a failure needs a failing plan
    assert run_bound(d, bid)[0] == bound.BOUND_OK
    d.reshape({"handle": handle, "shapes": {"data": [2, 3, 16, 16]}}, [])  # another pool: the binding is stale
    assert run_bound(d, bid)[0] == bound.BOUND_UNKNOWN
    assert d.bindings.get(bid) is None


def test_the_reply_says_whether_the_request_left_a_cpu_free(tiny):
    from device_daemons.cpu.precision import CPUS
    from device_daemons.cpu.server import CpuDaemon
    d = CpuDaemon(threads=1)
    try:
        flags = {}
        for threads in (1, 0):  # a one-thread team; a team of every CPU (its first request: its size still measured)
            handle = d.load_network({"xml": tiny.xml, "config": dict(F32, INFERENCE_NUM_THREADS=threads)},
                                    [])["handle"]
            slot = d.shm_create({"size": 1 << 16}, [])["slot"]
            spec = msgpack.packb({"slot": slot, "inputs": {"data": [0, [1, 3, 16, 16]]},
                                  "out": [3072, (1 << 16) - 3072]})
            bid, _ = bound.check_bind_result(d.infer_bind(bound.bind_request(handle, spec), []), 1 << 16)
            reply, then = d.infer_bound(bound.REQUEST.pack(bid))
            then()
            status, _, flags[threads], _ = bound.check_reply(reply)
            assert status == bound.BOUND_OK
        assert flags == {1: bound.SPARE_CPU if CPUS > 1 else 0, 0: 0}
    finally:
        d.cleanup()


class _Bound:
    """BoundRequests as request_path sees them, recording the polling it is given (unit test of the rule)."""

    def __init__(self, replies):
        self.replies, self.spins = list(replies), []

    def serves(self, conn, handle, inputs):
        return True

    def run(self, inputs, deadline, spin):
        self.spins.append(spin)
        return {}, *self.replies.pop(0)


def test_a_client_polls_for_a_short_reply_only_where_the_daemon_left_a_cpu_free():
    from device_daemons.client import request_path

    class Net:
        perf_count, inputs, poll_s = False, {}, 0.0
        bound = _Bound([(100, True), (100, True), (100, False), (100, False), (5000, True), (300, True), (300, True)])

        def loaded(self, deadline):
            return "conn", 1
    net = Net()
    for _ in range(7):
        request_path.run(net, {}, None)
    spin = request_path.SPIN_S
    # the first: nothing known yet; then a short compute and a CPU left free, polled for past its compute time;
    # not when the team took every CPU; not after a compute longer than the polling; at once after a short one
    assert net.bound.spins == [0.0, spin + 100e-6, spin + 100e-6, 0.0, 0.0, 0.0, spin + 300e-6]


def test_daemon_bind_errors(daemon):
    from core.microkernel import RemoteError
    d, handle, slot, spec = daemon
    with pytest.raises(RemoteError) as ei:
        d.infer_bind({"handle": handle}, [])
    assert ei.value.kind == "shm"
    with pytest.raises(RemoteError) as ei:
        d.infer_bind(bound.bind_request(handle + 100, spec), [])
    assert ei.value.kind == "handle"
    cramped = msgpack.packb({"slot": slot, "inputs": {"data": [0, [1, 3, 16, 16]]}, "out": [3072, 16]})
    with pytest.raises(RemoteError, match="do not fit") as ei:
        d.infer_bind(bound.bind_request(handle, cramped), [])
    assert ei.value.kind == "shm"
    outside = msgpack.packb({"slot": slot, "inputs": {"data": [1 << 16, [1, 3, 16, 16]]}, "out": [0, 64]})
    with pytest.raises(RemoteError) as ei:
        d.infer_bind(bound.bind_request(handle, outside), [])
    assert ei.value.kind == "shm"


def test_daemon_drops_bindings_with_their_slot_or_network(daemon):
    d, handle, slot, spec = daemon
    first = bound.check_bind_result(d.infer_bind(bound.bind_request(handle, spec), []), 1 << 16)[0]
    second = bound.check_bind_result(d.infer_bind(bound.bind_request(handle, spec), []), 1 << 16)[0]
    assert len(d.bindings) == 2 and first != second
    d.shm_detach({"slot": slot}, [])
    assert len(d.bindings) == 0
    slot = d.shm_create({"size": 1 << 16}, [])["slot"]
    spec = msgpack.packb({"slot": slot, "inputs": {"data": [0, [1, 3, 16, 16]]}, "out": [3072, 4096]})
    d.infer_bind(bound.bind_request(handle, spec), [])
    d.unload({"handle": handle}, [])
    assert len(d.bindings) == 0


def test_table_keeps_at_most_its_limit():
    table = BoundTable(max_bindings=3)
    ids = [table.add(Binding(None, None, i, {}, {})) for i in range(5)]
    assert len(set(ids)) == 5 and len(table) == 3
    assert table.get(ids[0]) is None and table.get(ids[1]) is None and table.get(ids[4]).slot == 4
    table.drop_slot(4)  # (compared by identity: the small int 4 is one object)
    assert len(table) == 2


def test_check_bind_result_rejects_what_breaks_the_contract():
    from core.microkernel import ProtocolError
    good = bound.bind_result(5, {"prob": [64, [1, 10]]})
    assert bound.check_bind_result(good, 4096) == (5, [("prob", 64, (1, 10))])
    for bad in ({"binding": 0, "outputs": good["outputs"]}, {"binding": True, "outputs": good["outputs"]},
                {"binding": 5, "outputs": b"\xc1"}, {"binding": 5, "outputs": msgpack.packb({})},
                {"binding": 5, "outputs": msgpack.packb({"p": [3, [1]]})},
                {"binding": 5, "outputs": msgpack.packb({"p": [64, [1, 10000]]})}, "nope"):
        with pytest.raises(ProtocolError):
            bound.check_bind_result(bad, 4096)


def test_check_reply_reads_failures_and_rejects_what_breaks_the_contract():
    from core.microkernel import ProtocolError, RemoteError
    assert bound.check_reply(bound.REPLY.pack(bound.BOUND_OK, 42, 0)) == (bound.BOUND_OK, 42, 0, None)
    assert bound.check_reply(bound.REPLY.pack(bound.BOUND_OK, 42, bound.SPARE_CPU)) == \
        (bound.BOUND_OK, 42, bound.SPARE_CPU, None)
    assert bound.check_reply(bound.REPLY.pack(bound.BOUND_UNKNOWN, 0, 0)) == (bound.BOUND_UNKNOWN, 0, 0, None)
    status, _, _, error = bound.check_reply(bound.failure(RemoteError("kernel", "it broke: " + "x" * 5000)))
    assert status == bound.BOUND_FAILED and error.kind == "kernel" and error.message.startswith("it broke")
    assert len(bound.failure(RemoteError("kernel", "y" * 9000))) <= bound.REPLY.size + bound.MAX_MESSAGE
    for bad in (b"", b"short", bound.REPLY.pack(7, 0, 0), bound.REPLY.pack(bound.BOUND_OK, 1, 0) + b"extra",
                bound.REPLY.pack(bound.BOUND_OK, 1, 2),  # an unknown flag
                struct.pack("<II", bound.BOUND_OK, 1),  # a reply of the first format (8 bytes)
                bound.REPLY.pack(bound.BOUND_FAILED, 0, 0) + b"z" * (bound.MAX_MESSAGE + 1)):
        with pytest.raises(ProtocolError):
            bound.check_reply(bad)
