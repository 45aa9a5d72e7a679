"""The CPU daemon under hostile or careless clients (issue 8, section 3).

Every test talks to the SAME daemon process (one per module), through raw ZeroMQ
sockets or the microkernel Client, the way a broken or malicious client would;
the last test checks that this very process still serves correct results
(compared with pycaffe). Each case used to kill or block the daemon.
"""
from __future__ import annotations

import mmap
import os
import shutil
import tempfile
import threading

import msgpack
import numpy as np
import pytest

from core.microkernel import Client, RemoteError
from device_daemons import bound_protocol as bound
from tests.daemon.conftest import F32, assert_close, cleanup_runtime, raw_reply, raw_socket, run_mo, write_text

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def daemon():
    """One CPU daemon (2 pool threads) in a runtime dir of this module."""
    from device_daemons.client import daemon as lifecycle
    saved = os.environ.get("MO_CORE_RUNTIME_DIR")
    base = tempfile.mkdtemp(prefix="dh-")
    runtime = os.path.join(base, "rt")
    os.environ["MO_CORE_RUNTIME_DIR"] = runtime
    try:
        launch = lifecycle.launch("CPU", threads=2)
        client = Client(launch.record["endpoint"], timeout=30)
        info, _ = client.call("hello")
        # the local carrier (a Unix socket beside the endpoint): bind and run requests there
        carrier = Client(launch.record["endpoint"], timeout=30, direct_path=info["direct"]["path"])
        yield {"pid": launch.record["pid"], "endpoint": launch.record["endpoint"], "client": client,
               "carrier": carrier, "runtime": runtime}
        carrier.close()
        client.close()
    finally:
        left = cleanup_runtime(runtime)
        if saved is None:
            os.environ.pop("MO_CORE_RUNTIME_DIR", None)
        else:
            os.environ["MO_CORE_RUNTIME_DIR"] = saved
        shutil.rmtree(base, ignore_errors=True)
    assert not left, f"daemon processes had to be killed: {left}"


def _reply(sock, timeout_ms=20000):
    reply = raw_reply(sock, timeout_ms)
    assert reply is not None, "no reply: the daemon is blocked or dead"
    return reply


def _error_kind(client, op, args=None, arrays=None):
    with pytest.raises(RemoteError) as err:
        client.call(op, args, arrays)
    return err.value


def _load(client, xml):
    # f32: the tiny net's results are compared with pycaffe to 1e-4
    return client.call("load_network", {"xml": xml, "config": F32})[0]["handle"]


# ------------------------------------------------------------------ shared memory

def test_a_client_cannot_truncate_its_slot(daemon, tiny):
    """Truncating a mapped slot made the daemon's next read die with SIGBUS. Slots
    are now the daemon's sealed memfds: the size cannot change."""
    client = daemon["client"]
    handle = _load(client, tiny.xml)
    x = tiny.input(11)
    size = 1 << 16
    slot = client.call("shm_create", {"size": size})[0]
    assert slot["path"] == f"/proc/{daemon['pid']}/fd/{slot['path'].rsplit('/', 1)[1]}"
    fd = os.open(slot["path"], os.O_RDWR)
    try:
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 0)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, size * 2)
        assert os.fstat(fd).st_size == size
        mm = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    np.ndarray(x.shape, np.float32, buffer=mm)[...] = x
    spec = msgpack.packb({"slot": slot["slot"], "inputs": {"data": [0, list(x.shape)]},
                          "out": [4096, size - 4096]})
    carrier = daemon["carrier"]
    result, _ = carrier.call("infer_bind", {"handle": handle, "shm": spec}, direct=True)
    bid, outputs = bound.check_bind_result(result, size)
    status, _, _ = bound.REPLY.unpack(carrier.call_raw(bound.RAW_INFER, bound.REQUEST.pack(bid)))
    assert status == bound.BOUND_OK
    ((name, off, shape),) = outputs
    assert_close(np.ndarray(shape, np.float32, buffer=mm, offset=off), tiny.reference(x))
    # the old way (the client's own /dev/shm file, attached by path) is gone
    assert _error_kind(client, "shm_attach", {"path": "/dev/shm/mo-core-x", "size": size}).kind == "unknown_op"


@pytest.mark.parametrize("spec", [
    {"slot": 0, "inputs": {"data": [0, [1, 3, 16, 16]]}, "out": [0, 8]},       # no such slot
    {"inputs": {"data": [(1 << 16) - 4, [1, 3, 16, 16]]}, "out": [0, 8]},       # beyond the slot
    {"inputs": {"data": [2, [1, 3, 16, 16]]}, "out": [0, 8]},                   # misaligned
    {"inputs": {"data": [0, [1 << 40, 1 << 40]]}, "out": [0, 8]},               # absurd shape
    {"inputs": {"data": [0, [[0] * 70000] * 3]}, "out": [0, 8]},                # too many elements
])
def test_bad_slot_specs_are_error_replies(daemon, tiny, spec):
    client = daemon["client"]
    handle = _load(client, tiny.xml)
    if "slot" not in spec:
        spec = dict(spec, slot=client.call("shm_create", {"size": 1 << 16})[0]["slot"])
    with pytest.raises(RemoteError) as err:
        daemon["carrier"].call("infer_bind", {"handle": handle, "shm": msgpack.packb(spec)}, direct=True)
    # (a spec too large for a datagram goes over ZeroMQ, where infer_bind is not served)
    assert err.value.kind == ("unknown_op" if len(msgpack.packb(spec)) > 40000 else "shm"), err.value
    # a binding that does not exist: the raw verb says so, and the daemon serves on
    assert bound.REPLY.unpack(daemon["carrier"].call_raw(bound.RAW_INFER, bound.REQUEST.pack(12345)))[0] == \
        bound.BOUND_UNKNOWN


# ------------------------------------------------------------------ files that are not files

def test_fifo_paths_do_not_block_the_pool(daemon, tiny, tmp_path):
    """open() of a FIFO blocks until a writer comes: two such loads used to stop
    every load and inference. Now: regular files only, opened without blocking."""
    fifo = str(tmp_path / "net.xml")
    os.mkfifo(fifo)
    kernel_fifo = str(tmp_path / "kernels.py")
    os.mkfifo(kernel_fifo)
    client = daemon["client"]
    calls = [client.call_async("load_network", {"xml": fifo}) for _ in range(4)]  # 2 pool threads
    calls.append(client.call_async("load_network", {"xml": tiny.xml, "bin": fifo}))
    calls.append(client.call_async("add_extension", {"path": kernel_fifo}))
    calls.append(client.call_async("load_network", {"xml": "/dev/zero"}))
    kinds = []
    for call in calls:
        with pytest.raises(RemoteError) as err:
            call.result(30)
        kinds.append((err.value.kind, "not a regular file" in err.value.message))
    assert kinds == [("network", True)] * 5 + [("kernel", True), ("network", True)]
    x = tiny.input(12)
    handle = _load(client, tiny.xml)
    result, _ = client.call("infer", {"handle": handle, "inputs": {"data": x}})
    assert_close(result["outputs"]["prob"], tiny.reference(x))


# ------------------------------------------------------------------ user code that raises BaseException

@pytest.mark.parametrize("raise_what", ["KeyboardInterrupt", "SystemExit(3)", "GeneratorExit"])
def test_kernel_file_raising_base_exceptions(daemon, tiny, tmp_path, raise_what):
    """A kernel file raising KeyboardInterrupt at import killed the pool thread that
    imported it (two such and no request was served)."""
    path = write_text(str(tmp_path / "bad_kernel.py"), f"raise {raise_what}\n")
    client = daemon["client"]
    for _ in range(4):  # twice the pool
        err = _error_kind(client, "add_extension", {"path": path, "check_only": True})
        assert err.kind == "kernel" and raise_what.split("(")[0] in err.message, err
    x = tiny.input(13)
    result, _ = client.call("infer", {"handle": _load(client, tiny.xml), "inputs": {"data": x}})
    assert_close(result["outputs"]["prob"], tiny.reference(x))


# ------------------------------------------------------------------ headers that cost seconds

@pytest.mark.parametrize("build", [
    lambda: msgpack.packb({"v": 1, "id": 5, "op": "ping", "args": {"x": [0] * 15_000_000}}),
    lambda: msgpack.packb({"v": 1, "id": 5, "op": "ping", "args": {"x": [[0] * 1000] * 200}}),
    lambda: b"\xdd" + (15_000_000).to_bytes(4, "big") + b"\0" * 15_000_000,
])
def test_huge_headers_are_refused_by_their_size(daemon, build):
    """A 15 MB header of zeros held the I/O thread for 18 s, and was then served.
    Container lengths and the total of elements are capped while unpacking: the
    message is refused (an error reply when its id can be read, else dropped)."""
    sock = raw_socket(daemon["endpoint"])
    try:
        sock.send_multipart([build()])
        sock.send_multipart([msgpack.packb({"v": 1, "id": 7, "op": "ping"})])
        replies = []
        while not replies or replies[-1]["id"] != 7:
            replies.append(_reply(sock, 60000))
        assert replies[-1]["ok"] and replies[-1]["result"]["pid"] == daemon["pid"]
        for r in replies[:-1]:
            assert r["id"] == 5 and r["ok"] is False and r["error"]["kind"] == "protocol", r
            assert "limit" in r["error"]["message"], r
    finally:
        sock.close(0)


def test_slow_work_never_runs_where_hello_is_answered(daemon, slow_model):
    """infer_fast ran networks in the I/O thread. Now `hello` is answered while a
    slow request runs (on the pool, or on a connection of the local carrier, whose
    threads never serve the main socket), and the carrier serves only its own verbs."""
    xml, kernel = slow_model
    client = daemon["client"]
    handle = client.call("load_network", {"xml": xml, "kernels": [kernel]})[0]["handle"]
    slow = client.call_async("infer", {"handle": handle,
                                       "inputs": {"data": np.full((1, 4), 105.0, np.float32)}})
    hello = client.call_async("hello")
    assert hello.result(20)[0]["pid"] == daemon["pid"]
    assert not slow.done()  # answered while the 5 s request is still running
    assert np.array_equal(slow.result(30)[0]["outputs"]["custom1"], np.full((1, 4), 211.0))
    carrier = daemon["carrier"]
    with pytest.raises(RemoteError) as err:
        carrier.call("load_network", {"xml": xml}, direct=True)
    assert err.value.kind == "unknown_op"


# ------------------------------------------------------------------ absurd shapes

@pytest.fixture(scope="module")
def huge_ir(tmp_path_factory):
    from ir import Edge, Layer, Network, Port, write_ir
    dims = (1, 1 << 70)
    net = Network("huge", [Layer(0, "data", "Input", outputs=[Port(0, dims)]),
                           Layer(1, "relu", "ReLU", inputs=[Port(0, dims)], outputs=[Port(1, dims)])],
                  [Edge(0, 0, 1, 0)])
    xml = str(tmp_path_factory.mktemp("huge") / "huge.xml")
    write_ir(net, xml)
    return xml


def test_absurd_shapes_are_error_replies(daemon, tiny, huge_ir):
    client = daemon["client"]
    err = _error_kind(client, "load_network", {"xml": huge_ir})
    assert err.kind == "network" and "1180591620717411303424" in err.message and "limit" in err.message
    handle = _load(client, tiny.xml)
    for shapes in ({"data": [1 << 40, 3, 16, 16]}, {"data": [1 << 63, 1]}, {"data": [1] * 9}):
        assert _error_kind(client, "reshape", {"handle": handle, "shapes": shapes}).kind == "input"
    assert _error_kind(client, "load_network", {"xml": tiny.xml, "batch": 1 << 62}).kind == "input"


def test_infer_cli_on_an_absurd_shape(daemon, huge_ir):
    env = {"MO_CORE_RUNTIME_DIR": daemon["runtime"]}
    proc = run_mo("infer", "-m", huge_ir, "--no-auto-start", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[ ERROR ]" in proc.stderr and "Traceback" not in proc.stderr
    assert "1180591620717411303424" in proc.stderr and "limit" in proc.stderr


# ------------------------------------------------------------------ endpoints

def test_abstract_socket_needs_a_key(fresh_runtime):
    proc = run_mo("daemon", "start", "--endpoint", "ipc://@mo-core-hostile-test")
    assert proc.returncode == 1
    assert "[ ERROR ]" in proc.stderr and "abstract" in proc.stderr and "--key-file" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------ and after all that

def test_the_same_daemon_still_serves_correct_results(daemon, tiny):
    from device_daemons.client import IECore
    assert daemon["client"].call("ping")[0]["pid"] == daemon["pid"]
    ie = IECore(policy="existing", endpoint=daemon["endpoint"])
    try:
        exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU", config=F32)
        xs = [tiny.input(100 + i) for i in range(4)]
        # pycaffe's net is not thread-safe: the references are computed here, once
        refs = [tiny.reference(x) for x in xs]
        for x, ref in zip(xs, refs):
            assert_close(exec_net.infer({"data": x})["prob"], ref)
        errors = []

        def run(t):
            try:
                for x, ref in zip(xs, refs):
                    assert_close(exec_net.infer({"data": x})["prob"], ref)
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
        threads = [threading.Thread(target=run, args=(t,)) for t in range(3)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, errors
        assert ie.daemon_pid() == daemon["pid"]
    finally:
        ie.close()
