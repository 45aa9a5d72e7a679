"""The local carrier, a Unix seqpacket socket (core/microkernel/direct.py), against a
real server thread and real sockets: calls go over it, each connection on a thread of
its own (a long request holds only its own connection), messages too large for a
datagram go over ZeroMQ both ways, signatures are checked as on ZeroMQ, and a
malformed or oversized datagram costs its sender the connection, never the server.
Raw verbs (Server.handle_raw): served without a key only, their failures and unknown
tags come back as errors, and raw and framed replies never mix. Verbs of the local
lane are served there only."""
from __future__ import annotations

import os
import socket
import threading
import time

import numpy as np
import pytest

from core.microkernel import (Client, MicrokernelError, MicrokernelTimeout, ProtocolError, RemoteError, Server,
                              new_ipc_endpoint)
from core.microkernel import direct
from tests.support import wait_until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=[None, b"k" * 32], ids=["plain", "signed"])
def served(request):
    key = request.param
    server = Server(new_ipc_endpoint("direct"), service="direct", key=key, threads=1, spin=0.001)

    def echo(args, arrays):
        return {"args": args, "thread": threading.current_thread().name}, arrays

    def big(args, arrays):
        return {}, [np.arange(args["n"], dtype=np.float32)]
    def failing(payload):
        raise ValueError(f"no good: {bytes(payload)!r}")
    def slow(args, arrays):
        time.sleep(args["s"])
    for op, fn in (("echo", echo), ("big", big), ("slow", slow)):  # (ZeroMQ for what does not fit a datagram)
        server.handle(op, fn)
        server.handle(op, fn, lane="local")
    server.handle("only_local", echo, lane="local")
    server.handle_raw(7, lambda payload: bytes(payload)[::-1])
    server.handle_raw(8, failing)
    server.handle_raw(9, lambda payload: b"x" * (direct.MAX_RAW_PAYLOAD + 1))
    server.handle_raw(11, lambda payload: time.sleep(float(bytes(payload))) or b"slept")
    after = server.after_reply = []  # (what verb 12's work after its replies saw)

    def reply_first(payload):
        def then():
            time.sleep(0.3)
            after.append(bytes(payload))
            if payload == b"fail":
                raise RuntimeError("a bug after the reply")
        return b"done " + bytes(payload), then
    server.handle_raw(12, reply_first)
    runner = threading.Thread(target=server.serve)
    runner.start()
    try:
        with Client(server.endpoint, timeout=10, key=key) as main:
            info = main.call("hello")[0]
        yield server, info, key
    finally:
        server.request_stop()
        runner.join(10)
    assert not runner.is_alive()
    assert not os.path.exists(info["direct"]["path"])


def test_calls_go_over_the_unix_socket(served):
    server, info, key = served
    with Client(server.endpoint, timeout=10, key=key, direct_path=info["direct"]["path"]) as local:
        for i in range(20):
            result, arrays = local.call("echo", {"i": i}, [np.full(3, i, np.float32)], direct=True, spin=0.0005)
            assert result["args"] == {"i": i} and result["thread"].startswith("direct-local-")
            np.testing.assert_array_equal(arrays[0], np.full(3, i, np.float32))
        assert server.direct_messages == 20
        # not direct=True: the client's I/O thread and ZeroMQ, as before
        assert local.call("echo", {"i": -1})[0]["args"] == {"i": -1}
        assert server.direct_messages == 20


def test_messages_too_large_for_a_datagram_go_over_zeromq(served):
    server, info, key = served
    with Client(server.endpoint, timeout=10, key=key, direct_path=info["direct"]["path"]) as local:
        n = direct.MAX_DATAGRAM  # a reply of 4 x MAX_DATAGRAM bytes: sent as TOO_LARGE, repeated over ZeroMQ
        arrays = local.call("big", {"n": n}, direct=True)[1]
        np.testing.assert_array_equal(arrays[0], np.arange(n, dtype=np.float32))
        assert server.direct_messages == 1
        x = np.ones(direct.MAX_DATAGRAM, np.float32)  # a request that large never tries the socket
        np.testing.assert_array_equal(local.call("echo", {}, [x], direct=True)[1][0], x)
        assert server.direct_messages == 1
        assert local.call("echo", {"after": 1}, direct=True)[0]["args"] == {"after": 1}
        assert server.direct_messages == 2


def _raw(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(path)
    sock.settimeout(5)
    return sock


def test_bad_datagrams_cost_the_sender_its_connection(served):
    server, info, key = served
    path = info["direct"]["path"]
    bad = [b"\x01", b"\x00\x00\x00\x00", b"\x02\x00\x00\x00\x05\x00\x00\x00", b"\xff" * 64,
           b"\x01\x00\x00\x00\x0a\x00\x00\x00",  # one frame of 10 bytes, none there
           b"\x01\x00\x00\x00" + b"\x00" * 4 + b"z" * (direct.MAX_DATAGRAM + 100)]  # cut: too large
    for datagram in bad:
        sock = _raw(path)
        sock.send(datagram)
        assert sock.recv(100) == b""  # closed by the server
        sock.close()
    # a well-formed datagram that is not a valid (or not a signed) request: no reply, the connection stays
    sock = _raw(path)
    sock.sendmsg(direct.pack([b"not msgpack"]))
    sock.settimeout(0.5)
    with pytest.raises(socket.timeout):
        sock.recv(100)
    sock.close()
    with Client(server.endpoint, timeout=10, key=key, direct_path=path) as local:
        assert local.call("echo", {"ok": 1}, direct=True)[0]["args"] == {"ok": 1}


def test_signatures_are_checked_as_on_zeromq(served):
    """An unsigned request: answered by a server without a key, dropped by one with."""
    server, info, key = served
    with Client(server.endpoint, timeout=1, direct_path=info["direct"]["path"]) as unsigned:
        if key is None:
            assert unsigned.call("echo", {"u": 1}, direct=True)[0]["args"] == {"u": 1}
        else:
            with pytest.raises(MicrokernelError, match="no reply"):
                unsigned.call("echo", {}, direct=True)


def test_a_missing_socket_leaves_zeromq(served, tmp_path):
    server, info, key = served
    gone = str(tmp_path / "nothing.direct")
    with Client(server.endpoint, timeout=10, key=key, direct_path=gone) as local:
        assert local.call("echo", {"z": 1}, direct=True)[0]["args"] == {"z": 1}
        assert local._core.direct_path is None
    assert server.direct_messages == 0


def test_a_server_that_does_not_answer_times_out_as_such(served):
    """Polling for the reply (spin) never waits past the poll: the call ends at its own
    timeout with MicrokernelTimeout, not stuck in a receive until the socket's timeout."""
    server, info, key = served
    with Client(server.endpoint, timeout=10, key=key, direct_path=info["direct"]["path"]) as local:
        t0 = time.monotonic()
        with pytest.raises(MicrokernelTimeout, match="no reply to 'slow'"):
            local.call("slow", {"s": 1.5}, timeout=0.5, direct=True, spin=0.002)
        assert time.monotonic() - t0 < 1.4
        # the connection the slow handler still holds was let go: the next call has its own at once
        t0 = time.monotonic()
        assert local.call("echo", {"after": 2}, direct=True, spin=0.002)[0]["args"] == {"after": 2}
        assert time.monotonic() - t0 < 0.5


def test_a_long_request_holds_only_its_own_connection(served):
    server, info, key = served
    with Client(server.endpoint, timeout=10, key=key, direct_path=info["direct"]["path"]) as local:
        slow = threading.Thread(target=local.call, args=("slow", {"s": 1.0}), kwargs={"direct": True})
        slow.start()
        try:
            time.sleep(0.1)
            t0 = time.monotonic()
            for i in range(5):  # this thread's connection has a server thread of its own
                assert local.call("echo", {"i": i}, direct=True)[0]["args"] == {"i": i}
            assert time.monotonic() - t0 < 0.5
        finally:
            slow.join(10)


def test_one_process_gets_at_most_max_per_peer_connections(served):
    """Connections of one process (SO_PEERCRED) past MAX_PER_PEER are closed unanswered,
    and a client whose connection was refused so sends over ZeroMQ from then on."""
    server, info, key = served
    path = info["direct"]["path"]
    held = [_raw(path) for _ in range(direct.MAX_PER_PEER)]
    try:
        with Client(server.endpoint, timeout=10, key=key, direct_path=path) as local:
            for i in range(3):
                assert local.call("echo", {"i": i}, direct=True)[0]["args"] == {"i": i}
            assert local._core.direct_path is None and server.direct_messages == 0
        refused = _raw(path)
        assert refused.recv(100) == b""
        refused.close()
    finally:
        for sock in held:
            sock.close()
    assert wait_until(lambda: not server._peers, 5)  # their threads saw them close
    with Client(server.endpoint, timeout=10, key=key, direct_path=path) as local:  # room again
        assert local.call("echo", {"x": 1}, direct=True)[0]["args"] == {"x": 1}
        assert local._core.direct_path is not None and server.direct_messages == 1


def test_local_verbs_are_served_on_the_carrier_only(served):
    server, info, key = served
    assert "only_local" in info["direct"]["ops"] and "only_local" not in info["ops"]
    with Client(server.endpoint, timeout=10, key=key, direct_path=info["direct"]["path"]) as local:
        assert local.call("only_local", {"l": 1}, direct=True)[0]["args"] == {"l": 1}
        with pytest.raises(RemoteError) as ei:
            local.call("only_local", {"l": 1})  # over ZeroMQ (the main socket)
        assert ei.value.kind == "unknown_op"


def test_remote_errors_come_back_over_it(served):
    server, info, key = served
    with Client(server.endpoint, timeout=10, key=key, direct_path=info["direct"]["path"]) as local:
        with pytest.raises(RemoteError) as ei:
            local.call("nothing", direct=True)
        assert ei.value.kind == "unknown_op"


def test_pack_and_unpack():
    frames = [b"head", b"", np.arange(4, dtype=np.float32)]
    data = b"".join(bytes(b) for b in direct.pack(frames))
    assert [bytes(f) for f in direct.unpack(data)] == [b"head", b"", np.arange(4, dtype=np.float32).tobytes()]
    assert direct.packed_size(frames) == len(data)
    for bad in (b"", b"\x00\x00\x00\x00", b"\x01\x00\x00\x00", data[:-1], data + b"x",
                (2000).to_bytes(4, "little") + b"\x00" * 8000):
        with pytest.raises(ProtocolError):
            direct.unpack(bad)


def test_raw_verbs(served):
    server, info, key = served
    path = info["direct"]["path"]
    if key is not None:  # no raw verbs where a key is the authentication: they are never signed
        assert "raw" not in info["direct"]
        with Client(server.endpoint, timeout=10, key=key, direct_path=path) as local:
            assert local.call_raw(7, b"abc") is None  # (send the framed equivalent)
        with Client(server.endpoint, timeout=10, direct_path=path) as unsigned:
            with pytest.raises(RemoteError) as ei:
                unsigned.call_raw(7, b"abc")
            assert ei.value.kind == "raw_unknown"
        return
    assert info["direct"]["raw"] == [7, 8, 9, 11, 12]
    with Client(server.endpoint, timeout=10, direct_path=path) as local:
        for i in range(5):  # raw and framed calls on one connection, each gets its own reply
            assert local.call_raw(7, b"abc%d" % i, spin=0.0005) == (b"abc%d" % i)[::-1]
            assert local.call("echo", {"i": i}, direct=True)[0]["args"] == {"i": i}
        assert local.call_raw(7, b"") == b""
        with pytest.raises(RemoteError) as ei:
            local.call_raw(8, b"zz")
        assert ei.value.kind == "raw_failed" and "ValueError: no good: b'zz'" in ei.value.message
        with pytest.raises(RemoteError) as ei:  # a reply larger than a raw payload may be is a failure
            local.call_raw(9, b"")
        assert ei.value.kind == "raw_failed"
        with pytest.raises(RemoteError) as ei:
            local.call_raw(10, b"")
        assert ei.value.kind == "raw_unknown"
        with pytest.raises(ValueError):
            local.call_raw(7, b"y" * (direct.MAX_RAW_PAYLOAD + 1))
        assert local.call_raw(7, b"ok") == b"ko"
    assert server.direct_messages == 15
    with Client(server.endpoint, timeout=10) as zmq_only:  # no direct carrier: nothing to send it over
        assert zmq_only.call_raw(7, b"abc") is None


def test_a_raw_verb_replies_before_its_work_after_the_reply(served):
    """A raw verb that returns (payload, then) is answered first; then() runs after the
    reply on the connection's thread (the next request on it waits for it), and a
    failing then() is logged without costing the connection."""
    server, info, key = served
    if key is not None:
        return  # (no raw verbs with a key: test_raw_verbs)
    with Client(server.endpoint, timeout=10, direct_path=info["direct"]["path"]) as local:
        t0 = time.monotonic()
        assert local.call_raw(12, b"one") == b"done one"
        assert time.monotonic() - t0 < 0.25 and server.after_reply == []  # answered before then() ended
        assert local.call_raw(12, b"fail") == b"done fail"  # (served after the first then(): same connection)
        assert server.after_reply == [b"one"]
        assert local.call_raw(7, b"still") == b"llits"  # the failed then() cost nothing
        assert server.after_reply == [b"one", b"fail"]


def test_raw_calls_wait_across_ticks_and_time_out_as_such(served):
    """A raw call waits in blocking receives that end every TICK (client.py's _Unix): a
    reply after several of them is still its reply, a call past its timeout fails with
    MicrokernelTimeout at that timeout, and the next call gets a connection of its own."""
    server, info, key = served
    if key is not None:
        return  # (no raw verbs with a key: test_raw_verbs)
    with Client(server.endpoint, timeout=10, direct_path=info["direct"]["path"]) as local:
        assert local.call_raw(11, b"0.35") == b"slept"  # three TICKs
        assert local.call("echo", {"framed": 1}, direct=True)[0]["args"] == {"framed": 1}  # (Python's timeouts)
        assert local.call_raw(11, b"0.01", spin=0.0005) == b"slept"  # (back to blocking receives)
        t0 = time.monotonic()
        with pytest.raises(MicrokernelTimeout, match="no reply to 'raw verb 11'"):
            local.call_raw(11, b"1.5", timeout=0.25)
        assert 0.2 < time.monotonic() - t0 < 0.6
        t0 = time.monotonic()  # the slow verb still holds that connection's thread: this one has its own
        assert local.call_raw(7, b"next") == b"txen"
        assert time.monotonic() - t0 < 0.5


def test_bad_raw_datagrams_cost_the_sender_its_connection(served):
    server, info, key = served
    path = info["direct"]["path"]
    head = direct.RAW_MARK.to_bytes(4, "little")
    for datagram in (head, head + b"\x07\x00\x00\x00" + b"\x00" * 4,  # cut headers
                     b"".join(direct.pack_raw(7, 1, b"p" * (direct.MAX_RAW_PAYLOAD + 1)))):  # payload too large
        sock = _raw(path)
        sock.send(datagram)
        assert sock.recv(100) == b""
        sock.close()
    sock = _raw(path)  # a good one on a raw socket: its reply is the raw reply, same id
    sock.send(b"".join(direct.pack_raw(7, 42, b"hi")))
    reply = sock.recv(100)
    if key is None:
        assert direct.unpack_raw(reply)[:2] == (direct.RAW_OK, 42) and bytes(direct.unpack_raw(reply)[2]) == b"ih"
    else:
        assert direct.unpack_raw(reply)[:2] == (direct.RAW_UNKNOWN, 42)
    sock.close()


def test_pack_and_unpack_raw():
    data = b"".join(bytes(b) for b in direct.pack_raw(3, 2 ** 63, b"payload"))
    assert direct.is_raw(data) and not direct.is_raw(b"".join(bytes(b) for b in direct.pack([b"x"])))
    word, rid, payload = direct.unpack_raw(data)
    assert (word, rid, bytes(payload)) == (3, 2 ** 63, b"payload")
    for bad in (data[:15], b"\x00" * 16, b"".join(direct.pack_raw(1, 1, b"z" * (direct.MAX_RAW_PAYLOAD + 1)))):
        with pytest.raises(ProtocolError):
            direct.unpack_raw(bad)
    assert direct.RAW_MARK > 1025  # never a frame count (protocol.Limits.max_frames)


def test_a_broken_new_connection_is_a_refusal_only_while_its_process_stays_alive():
    """A process that dies closes its sockets a moment before it shows as ended (inside a
    sandbox, longer): a new connection it broke is taken for a refusal - after which the
    request is sent again over ZeroMQ - only once the process stays alive for the grace
    (tests/tf_worker/test_kill.py: a killed TF worker's request ran again on its successor)."""
    from core.microkernel import client as client_module

    class Watch:
        def __init__(self, polls_alive):
            self.left = polls_alive

        def alive(self):
            self.left -= 1
            return self.left >= 0
    assert client_module._ends_within(Watch(0), 0.05)
    assert client_module._ends_within(Watch(5), 0.5)  # ends on the 6th look
    t0 = time.monotonic()
    assert not client_module._ends_within(Watch(10 ** 6), 0.05)
    assert 0.05 <= time.monotonic() - t0 < 0.5


def test_a_handler_can_send_its_carrier_thread_to_sleep_after_the_reply(monkeypatch):
    """A carrier connection's thread polls for the next request after a short one (spin_deadline),
    unless the handler said sleep_after_reply(): then it sleeps at once (the CPU daemon, after a
    request whose team kept every CPU busy, leaves its sleeping client a CPU to wake up on). Read
    from the thread's own CPU time between two requests."""
    from core.microkernel import server as server_module, sleep_after_reply
    monkeypatch.setattr(server_module, "spin_for", lambda seconds: seconds)  # (not switched off by the load)
    server = Server(new_ipc_endpoint("sleepy"), service="sleepy", threads=1, spin=0.05)
    seen = []

    def polls(payload):
        seen.append(time.thread_time())
        return b"polls"

    def sleeps(payload):
        seen.append(time.thread_time())
        sleep_after_reply()
        return b"sleeps"
    server.handle_raw(13, polls)
    server.handle_raw(14, sleeps)
    runner = threading.Thread(target=server.serve)
    runner.start()
    try:
        with Client(server.endpoint, timeout=10) as main:
            path = main.call("hello")[0]["direct"]["path"]
        with Client(server.endpoint, timeout=10, direct_path=path) as local:
            for verb in (13, 13, 14, 14, 13):
                assert local.call_raw(verb, b"") == (b"polls" if verb == 13 else b"sleeps")
                time.sleep(0.08)  # (past the 50 ms of polling)
    finally:
        server.request_stop()
        runner.join(10)
    spent = [b - a for a, b in zip(seen, seen[1:])]  # the thread's CPU time after each request but the last
    assert spent[0] > 0.02 and spent[1] > 0.02, spent  # polled 50 ms
    assert spent[2] < 0.01 and spent[3] < 0.01, spent  # slept


def test_the_idle_hook_runs_on_pool_threads_too(monkeypatch):
    """A verb served on the main lane runs on a pool thread; that thread, once idle for `after` seconds, calls
    the hook too (the CPU daemon's fallback requests keep OpenMP teams there as well), again after what the
    hook returns, and not at all before its first request."""
    server = Server(new_ipc_endpoint("idlepool"), service="idlepool", threads=1)
    calls = []

    def hook():
        calls.append((threading.current_thread().name, time.monotonic()))
        return 0.03 if len(calls) < 3 else None  # (looks twice more, then stops)
    server.on_idle(hook, 0.02)
    server.handle("echo", lambda args, arrays: {"args": args, "thread": threading.current_thread().name})
    runner = threading.Thread(target=server.serve)
    runner.start()
    try:
        time.sleep(0.1)
        assert calls == []  # no request yet: nothing to look at
        with Client(server.endpoint, timeout=10) as main:
            served_on = main.call("echo", {"x": 1})[0]["thread"]
        assert wait_until(lambda: len(calls) == 3, timeout=5), calls
        time.sleep(0.1)
        assert len(calls) == 3 and {name for name, _ in calls} == {served_on}, (calls, served_on)
        gaps = [b - a for (_, a), (_, b) in zip(calls, calls[1:])]
        assert all(g >= 0.025 for g in gaps), gaps
    finally:
        server.request_stop()
        runner.join(10)
