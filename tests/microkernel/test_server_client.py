"""Server and Client against a real echo worker process over ipc."""
from __future__ import annotations

import threading
import time

import msgpack
import numpy as np
import pytest
import zmq

from tests.support import run_in_threads
from tests.microkernel.conftest import echo_from_threads
from core.microkernel import (Client, MicrokernelError, MicrokernelTimeout, RemoteError,
                              decode_reply, encode_request)

pytestmark = pytest.mark.timeout(60)


def test_hello_and_ping(echo_worker):
    with Client(echo_worker.endpoint, timeout=5) as c:
        info, arrays = c.call("hello")
        assert info["service"] == "echo" and info["version"] == 1
        assert info["pid"] == echo_worker.pid and "sleep" in info["ops"]
        assert arrays == []
        assert c.call("ping")[0]["pid"] == echo_worker.pid


def test_echo_big_array_and_nested_args(echo_worker):
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    args = {"inputs": {"data": x, "aux": [np.arange(3), {"z": np.zeros((0, 4))}]}, "k": "v"}
    result, arrays = echo_worker.call("echo", args)
    assert np.array_equal(result["inputs"]["data"], x)
    assert np.array_equal(result["inputs"]["aux"][0], [0, 1, 2])
    assert result["inputs"]["aux"][1]["z"].shape == (0, 4)
    assert result["k"] == "v" and len(arrays) == 3


def test_add(echo_worker):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    result, _ = echo_worker.call("add", arrays=[a, a, a])
    assert result["sum"].dtype == np.float32 and np.array_equal(result["sum"], 3 * a)


def test_user_error_internal_error_and_unknown_verb(echo_worker):
    with pytest.raises(RemoteError) as ei:
        echo_worker.call("raise_user_error", {"kind": "shape", "message": "bad dims", "faq": 38})
    assert (ei.value.kind, ei.value.message, ei.value.faq) == ("shape", "bad dims", 38)
    with pytest.raises(RemoteError) as ei:
        echo_worker.call("raise_internal")
    assert ei.value.kind == "internal" and "ZeroDivisionError" in ei.value.message
    assert "raise_internal" in ei.value.traceback
    with pytest.raises(RemoteError) as ei:
        echo_worker.call("no_such_verb")
    assert ei.value.kind == "unknown_op" and "no_such_verb" in ei.value.message
    assert echo_worker.call("echo", {"still": "alive"})[0] == {"still": "alive"}


def test_call_async_and_heartbeat_during_slow_request(echo_worker):
    with Client(echo_worker.endpoint, timeout=10) as c:
        slow = c.call_async("sleep", {"seconds": 1.5, "tag": "slow"})
        assert not slow.wait(0.1) and not slow.done()
        t0 = time.monotonic()
        c.call("ping")  # the slow request runs on the pool: heartbeats still answer
        assert time.monotonic() - t0 < 0.5
        assert slow.wait(5) and slow.done()
        assert slow.result()[0]["tag"] == "slow"


def test_timeout_then_late_reply_is_discarded(echo_worker):
    with Client(echo_worker.endpoint, timeout=10) as c:
        with pytest.raises(MicrokernelTimeout, match="no reply to 'sleep'"):
            c.call("sleep", {"seconds": 0.6, "tag": "late"}, timeout=0.2)
        # The late "sleep" reply arrives while this call waits and must not be
        # taken for its answer.
        result, _ = c.call("sleep", {"seconds": 0.01, "tag": "fresh"})
        assert result["tag"] == "fresh"
        assert c.call("echo", {"n": 1})[0] == {"n": 1}


def test_client_close_fails_pending_calls(echo_worker):
    c = Client(echo_worker.endpoint, timeout=10)
    pending = c.call_async("sleep", {"seconds": 1.0})
    c.close()
    with pytest.raises(MicrokernelError, match="closed"):
        pending.result(2)
    with pytest.raises(MicrokernelError, match="closed"):
        c.call("ping")


@pytest.mark.timeout(120)
def test_many_threads_on_one_client_get_their_own_replies(echo_worker):
    n_threads, n_calls = 8, 200
    errors: list = []
    counts = [0] * n_threads
    with Client(echo_worker.endpoint, timeout=30) as c:
        def run(t: int) -> None:
            try:
                for i in range(n_calls):
                    a = np.full((i % 5 + 1, 3), t * 1000 + i, dtype=np.int32)
                    result, arrays = c.call("echo", {"t": t, "i": i, "a": a})
                    assert result["t"] == t and result["i"] == i
                    assert np.array_equal(result["a"], a)
                    counts[t] += 1
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
        run_in_threads(run, n_threads)
    assert not errors, errors[:3]
    assert sum(counts) == n_threads * n_calls == 1600


@pytest.mark.timeout(120)
def test_many_clients_are_not_mixed_up(echo_worker):
    errors: list = []
    def run(t: int) -> None:
        try:
            with Client(echo_worker.endpoint, timeout=30) as c:
                pend = [c.call_async("echo", {"t": t, "i": i}) for i in range(50)]
                for i, p in enumerate(pend):
                    assert p.result()[0] == {"t": t, "i": i}
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
    run_in_threads(run, 6)
    assert not errors, errors[:3]


def _raw_exchange(sock: zmq.Socket, frames: list, wait_ms: int = 500):
    sock.send_multipart(frames)
    if sock.poll(wait_ms):
        return sock.recv_multipart()
    return None


def test_live_server_survives_malformed_messages(echo_worker):
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(echo_worker.endpoint)
    try:
        good_head = encode_request(77, "echo", {"x": 1})[0]
        # Messages whose id can be recovered get a "protocol" error reply.
        with_id = [
            [msgpack.packb({"v": 1, "id": 11, "op": 3})],
            [msgpack.packb({"v": 2, "id": 12, "op": "echo"})],
            [msgpack.packb({"v": 1, "id": 13, "op": "echo", "args": [1]})],
            [msgpack.packb({"v": 1, "id": 14, "op": "echo", "args": {},
                            "arrays": [{"dtype": "<f4", "shape": [2**40, 2**40]}]}), b"abcd"],
            [msgpack.packb({"v": 1, "id": 15, "op": "echo", "args": {},
                            "arrays": [{"dtype": "O", "shape": [1]}]}), b"abcdefgh"],
            [msgpack.packb({"v": 1, "id": 16, "op": "echo", "extra": True})],
            [msgpack.packb({"v": 1, "id": 17, "op": "echo"})] + [b""] * 1100,
        ]
        for frames in with_id:
            reply = _raw_exchange(sock, frames, 5000)
            assert reply is not None
            rep = decode_reply(reply)
            assert rep.id == msgpack.unpackb(frames[0])["id"]
            assert not rep.ok and rep.error.kind == "protocol", rep.error
        # Garbage without a recoverable id is dropped (no reply).
        garbage = [
            [b"\x00\xffgarbage"],
            [good_head[:-4]],
            [msgpack.packb([1, 2, 3])],
            [msgpack.packb({"v": 1, "id": "x", "op": "echo"})],
            [b"\xdb\xff\xff\xff\xff"],
            [b""],
        ]
        for frames in garbage:
            assert _raw_exchange(sock, frames, 300) is None
        # ...and the server still answers a good request, on this socket and others.
        reply = _raw_exchange(sock, encode_request(78, "echo", {"after": "fuzz"}), 5000)
        rep = decode_reply(reply)
        assert rep.ok and rep.id == 78 and rep.result == {"after": "fuzz"}
    finally:
        sock.close(0)
        ctx.term()
    assert echo_worker.call("echo", {"x": 1})[0] == {"x": 1}
    assert echo_worker.restarts == 0


def test_client_discards_unknown_stale_and_malformed_replies(tmp_path):
    """A misbehaving server: before each real reply it sends garbage and a reply
    with an unknown id (both discarded); for "bad" it answers with a malformed
    reply carrying the right id (that call fails, the client stays usable)."""
    endpoint = f"ipc://{tmp_path}/fake.sock"
    ready, stop = threading.Event(), threading.Event()

    def fake_server():
        from core.microkernel import decode_request, encode_reply
        ctx = zmq.Context()
        sock = ctx.socket(zmq.ROUTER)
        sock.linger = 0
        sock.bind(endpoint)
        ready.set()
        try:
            while not stop.is_set():
                if not sock.poll(100):
                    continue
                ident, *frames = sock.recv_multipart()
                req = decode_request(frames)
                sock.send_multipart([ident, b"\xc1garbage"])
                sock.send_multipart([ident, *encode_reply(req.id + 1000, {"wrong": True})])
                if req.op == "bad":
                    sock.send_multipart([ident, msgpack.packb({"v": 1, "id": req.id, "ok": "y"})])
                else:
                    sock.send_multipart([ident, *encode_reply(req.id, {"echo": req.args})])
        finally:
            sock.close(0)
            ctx.term()

    th = threading.Thread(target=fake_server)
    th.start()
    try:
        assert ready.wait(5)
        with Client(endpoint, timeout=5) as c:
            assert c.call("echo", {"n": 0})[0] == {"echo": {"n": 0}}
            with pytest.raises(MicrokernelError, match="malformed reply"):
                c.call("bad")
            p = c.call_async("echo", {"n": 1})
            assert p.result()[0] == {"echo": {"n": 1}}
    finally:
        stop.set()
        th.join()


def test_base_exceptions_in_handlers_cost_one_reply_not_a_thread(echo_worker):
    """The echo worker has ONE pool thread: if a handler's KeyboardInterrupt killed
    it, nothing would be served after the first call."""
    for what in ("KeyboardInterrupt", "SystemExit", "GeneratorExit") * 2:
        with pytest.raises(RemoteError) as ei:
            echo_worker.call("raise_base", {"what": what})
        assert ei.value.kind == "internal" and what in ei.value.message
    assert echo_worker.call("echo", {"after": 1})[0] == {"after": 1}


def test_local_lane_serves_its_verbs_on_the_connections_thread():
    import os

    from core.microkernel import Server, new_ipc_endpoint
    server = Server(new_ipc_endpoint("lanes"), service="lanes", threads=2, spin=0.001)

    def where(args, arrays):
        return {"thread": threading.current_thread().name, "lane": args.get("lane")}
    server.handle("where", where)
    server.handle("where", where, lane="local")
    server.handle("only_local", where, lane="local")
    for lane in ("slow", "fast"):  # (one carrier: the ZeroMQ fast lane is gone)
        with pytest.raises(ValueError):
            server.handle("x", where, lane=lane)
    runner = threading.Thread(target=server.serve)
    runner.start()
    carrier = server.endpoint[len("ipc://"):] + ".direct"
    try:
        with Client(server.endpoint, timeout=10) as main:
            info = main.call("hello")[0]
            assert "lanes" not in info and "only_local" not in info["ops"]
            assert info["direct"] == {"path": carrier, "ops": ["only_local", "ping", "where"]}
            assert os.stat(carrier).st_mode & 0o777 == 0o600
            assert main.call("where")[0]["thread"].startswith("lanes-pool-")
            with pytest.raises(RemoteError, match="has no verb 'only_local'"):
                main.call("only_local")
        with Client(server.endpoint, timeout=10, direct_path=carrier) as local:
            for _ in range(20):
                reply = local.call("where", {"lane": "l"}, direct=True)[0]
                assert reply["thread"].startswith("lanes-local-") and reply["lane"] == "l"
            assert local.call("ping", direct=True)[0]["pid"] == os.getpid()
            with pytest.raises(RemoteError) as ei:
                local.call("shutdown", direct=True)
            assert ei.value.kind == "unknown_op" and "local lane" in ei.value.message
    finally:
        server.request_stop()
        runner.join(10)
    assert not runner.is_alive()
    assert not os.path.exists(server.endpoint[len("ipc://"):])
    assert not os.path.exists(carrier)


def test_direct_calls_from_many_threads(echo_worker):
    """call(direct=True): each thread sends and receives on a socket of its own."""
    with Client(echo_worker.endpoint, timeout=10) as c:
        errors = echo_from_threads(lambda op, args, t: c.call(op, args, direct=True, spin=0.0005 * (t % 2)))
        assert not errors, errors[:3]


def test_direct_call_timeout_then_late_reply_is_discarded(echo_worker):
    with Client(echo_worker.endpoint, timeout=10) as c:
        with pytest.raises(MicrokernelTimeout, match="no reply to 'sleep'"):
            c.call("sleep", {"seconds": 0.6, "tag": "late"}, timeout=0.2, direct=True)
        # the late reply arrives on this thread's socket while the next call waits
        assert c.call("sleep", {"seconds": 0.01, "tag": "fresh"}, direct=True)[0]["tag"] == "fresh"
        with pytest.raises(RemoteError) as ei:
            c.call("raise_user_error", {"kind": "shape", "message": "m"}, direct=True)
        assert ei.value.kind == "shape"


@pytest.mark.parametrize("direct", [False, True])
def test_a_watched_service_that_ends_fails_the_call_at_once(direct):
    """With watch=, a caller learns that the serving process ended (ServiceGone)
    instead of waiting for its timeout."""
    import os
    import signal

    from core.microkernel import ServiceGone, WorkerProcess
    from tests.microkernel.conftest import ECHO
    with WorkerProcess(ECHO, name="watched", request_timeout=60) as w:
        process = w._inst.proc
        with Client(w.endpoint, timeout=60) as c:
            timer = threading.Timer(0.5, os.kill, (w.pid, signal.SIGKILL))
            timer.start()
            try:
                with pytest.raises(ServiceGone, match="ended during 'sleep'"):
                    c.call("sleep", {"seconds": 30}, watch=process, direct=direct)
            finally:
                timer.cancel()


def test_spinning_stops_while_the_cpus_are_contended(tmp_path, monkeypatch):
    """Busy-polling is for an idle core: a spinning thread on contended CPUs waits
    for the scheduler longer than a wake-up costs (core/microkernel/spin.py)."""
    import os

    from core.microkernel import spin
    busy = tmp_path / "busy"
    busy.write_text("some avg10=98.96 avg60=98.76 avg300=98.62 total=6970564322\n"
                    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    idle = tmp_path / "idle"
    idle.write_text("some avg10=0.50 avg60=1.20 avg300=0.90 total=1234\n")
    assert spin.contended(str(busy)) is True and spin.contended(str(idle)) is False
    # without pressure information: the load average against the usable CPUs
    cpus = len(os.sched_getaffinity(0))
    assert spin.contended(str(tmp_path / "none")) == (os.getloadavg()[0] > cpus)
    assert isinstance(spin.contended(), bool)  # this machine's own answer
    monkeypatch.setitem(spin._state, "next", 0.0)
    monkeypatch.setattr(spin.contended, "__defaults__", (str(busy),))
    assert spin.spin_for(0.0005) == 0.0 and spin.spin_for(0) == 0.0
    monkeypatch.setattr(spin.contended, "__defaults__", (str(idle),))
    monkeypatch.setitem(spin._state, "next", 0.0)
    assert spin.spin_for(0.0005) == 0.0005


def test_a_carrier_connection_polls_for_a_client_that_sends_back_to_back():
    """After short work, or after any work when the request came soon after the previous
    reply (a client sending back to back), the connection polls `spin` s for the next
    request; a client that paused gets a sleeping thread (server.spin_deadline)."""
    from core.microkernel.server import spin_deadline
    spin = 0.0005
    assert spin_deadline(spin, 10.0, 10.0002, None) == 10.0002 + spin  # short work
    assert spin_deadline(spin, 10.0, 10.02, None) == 0.0  # long work, the first request
    assert spin_deadline(spin, 10.0, 10.02, 9.9999) == 10.02 + spin  # long work, came 0.1 ms after the reply
    assert spin_deadline(spin, 10.0, 10.02, 9.99) == 0.0  # long work after a 10 ms pause
    assert spin_deadline(0.0, 10.0, 10.0002, 9.9999) == 0.0  # spinning off (or the CPUs contended)


def test_clients_take_turns_and_one_cannot_queue_without_limit():
    """One client pipelines slow requests; another's request is served after at most one
    of them per pool thread (a single FIFO made it wait for all), and a client past its
    share of waiting requests gets a 'busy' reply at once (the daemon's memory stays bounded)."""
    from core.microkernel import Server, new_ipc_endpoint
    from core.microkernel.fair_queue import QueueLimits
    server = Server(new_ipc_endpoint("turns"), service="turns", threads=1,
                    queue_limits=QueueLimits(max_per_peer=12))
    server.handle("slow", lambda args, arrays: time.sleep(0.25) or {"slow": args["i"]})
    server.handle("quick", lambda args, arrays: {"quick": True})
    runner = threading.Thread(target=server.serve)
    runner.start()
    try:
        with Client(server.endpoint, timeout=30) as hog, Client(server.endpoint, timeout=30) as other:
            pending = [hog.call_async("slow", {"i": i}) for i in range(14)]
            time.sleep(0.1)
            t0 = time.monotonic()
            assert other.call("quick")[0] == {"quick": True}
            assert time.monotonic() - t0 < 1.5  # behind one or two slow ones, not twelve (3 s)
            refused = []
            for call in pending:
                try:
                    call.result(30)
                except RemoteError as exc:
                    refused.append(exc)
            # twelve may wait, one runs: the 14th is refused (and the 13th, when the pool had not yet taken the
            # first as it came)
            assert len(refused) in (1, 2) and all(e.kind == "busy" and "12 requests of this client" in e.message
                                                  for e in refused)
    finally:
        server.request_stop()
        runner.join(10)


def test_fair_queue_order_and_byte_limits():
    from core.microkernel.fair_queue import FairQueue, QueueLimits
    q = FairQueue(QueueLimits(max_per_peer=10, max_bytes_per_peer=100, max_bytes=150))
    for i in range(3):
        assert q.put(b"a", ("a", i), 10) is None
    assert q.put(b"b", ("b", 0), 10) is None
    assert q.put(b"a", ("a", 3), 100).startswith("this client's waiting requests hold")
    assert q.put(b"c", ("c", 0), 100) is None  # one request alone always fits a peer's share
    assert q.put(b"d", ("d", 0), 30).startswith("the waiting requests of all clients hold")
    assert [q.get() for _ in range(5)] == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("a", 2)]
    assert q.waiting() == 0
    q.stop(1)
    assert q.get() is None
