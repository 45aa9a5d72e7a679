"""Runtime directory, endpoint policy, key files and HMAC signing (live too)."""
from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys

import numpy as np
import pytest
import zmq

from core.microkernel import (AuthenticationError, Client, EndpointError, MicrokernelTimeout,
                              Server, WorkerProcess, check_endpoint, create_key_file,
                              encode_request, load_key_file, new_ipc_endpoint, runtime_dir,
                              sign_frames, verify_frames)

from .conftest import ECHO, REPO

pytestmark = pytest.mark.timeout(60)


# ----------------------------------------------------------------------------- runtime dir

def test_runtime_dir_is_created_private(tmp_path, monkeypatch):
    target = tmp_path / "rt"
    monkeypatch.setenv("MO_CORE_RUNTIME_DIR", str(target))
    assert runtime_dir() == str(target)
    st = os.stat(target)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
    assert runtime_dir() == str(target)  # verified again, still fine


def test_runtime_dir_default_under_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("MO_CORE_RUNTIME_DIR")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert runtime_dir() == str(tmp_path / "mo-core")
    assert stat.S_IMODE(os.stat(tmp_path / "mo-core").st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o701, 0o777])
def test_runtime_dir_group_or_world_access_is_refused(tmp_path, monkeypatch, mode):
    target = tmp_path / "open"
    target.mkdir()
    target.chmod(mode)
    monkeypatch.setenv("MO_CORE_RUNTIME_DIR", str(target))
    with pytest.raises(EndpointError, match="accessible by group/others.*chmod 700"):
        runtime_dir()


def test_runtime_dir_symlink_is_refused(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.setenv("MO_CORE_RUNTIME_DIR", str(link))
    with pytest.raises(EndpointError, match="symbolic link"):
        runtime_dir()


def test_new_ipc_endpoint(runtime_env):
    a, b = new_ipc_endpoint("caffe"), new_ipc_endpoint("caffe")
    assert a != b
    assert a.startswith(f"ipc://{runtime_env}/caffe-") and a.endswith(".sock")
    with pytest.raises(EndpointError):
        new_ipc_endpoint("../evil")


# ----------------------------------------------------------------------------- endpoint policy

def test_ipc_paths_need_no_key():
    assert check_endpoint("ipc:///tmp/x.sock", have_key=False) is None


def test_an_ipc_path_serves_without_a_key():
    """Not only accepted by the policy: a server and a client without a key really
    talk there (and a client that signs is ignored by a server that does not)."""
    import threading
    server = Server(new_ipc_endpoint("open"), service="open")
    connect = server.endpoint
    runner = threading.Thread(target=server.serve)
    runner.start()
    try:
        with Client(connect, timeout=10) as client:
            assert client.call("ping")[0]["pid"] == os.getpid()
        with Client(connect, timeout=1, key=b"k" * 32) as signer:
            with pytest.raises(MicrokernelTimeout):
                signer.call("ping")  # its signature frame makes a malformed message there
    finally:
        server.request_stop()
        runner.join(10)


@pytest.mark.parametrize("ep", ["tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://10.0.0.1:5555",
                                "tcp://eth0:5555", "tcp://example.com:80", "tcp://[::]:5555",
                                "tcp://127.0.0.1:5;10.0.0.1:5", "ipc://@mo-core-abstract",
                                # loopback too: every local user reaches it (stopped another user's daemon)
                                "tcp://127.0.0.1:5555", "tcp://127.0.0.1:*", "tcp://localhost:80",
                                "tcp://[::1]:5555", "tcp://127.1.2.3:9"])
def test_tcp_and_abstract_endpoints_need_a_key(ep):
    with pytest.raises(EndpointError, match="without an authentication key"):
        check_endpoint(ep, have_key=False)
    check_endpoint(ep, have_key=True)


@pytest.mark.parametrize("ep", ["udp://1.2.3.4:5", "pgm://x", "ws://localhost:1", "", "ipc"])
def test_unsupported_transports_are_refused(ep):
    with pytest.raises(EndpointError):
        check_endpoint(ep, have_key=True)


def test_server_refuses_non_loopback_tcp_without_key():
    # Refused before any socket is created or bound.
    with pytest.raises(EndpointError, match="without an authentication key"):
        Server("tcp://0.0.0.0:45123")
    with pytest.raises(EndpointError):
        Client("tcp://*:45123")


def test_worker_main_refuses_non_loopback_tcp_without_key():
    proc = subprocess.run([sys.executable, "-m", ECHO, "--endpoint", "tcp://0.0.0.0:45124"],
                          capture_output=True, text=True, timeout=30, cwd=REPO)
    assert proc.returncode == 1
    assert "[ ERROR ]" in proc.stderr and "authentication key" in proc.stderr


# ----------------------------------------------------------------------------- keys and HMAC

def test_key_file_create_and_load(tmp_path):
    path = tmp_path / "key"
    key = create_key_file(str(path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_key_file(str(path)) == key and len(key) >= 32
    with pytest.raises(FileExistsError):
        create_key_file(str(path))


def test_key_file_readable_by_others_is_refused(tmp_path):
    path = tmp_path / "key"
    create_key_file(str(path))
    path.chmod(0o644)
    with pytest.raises(EndpointError, match="chmod 600"):
        load_key_file(str(path))


def test_short_key_is_refused(tmp_path):
    path = tmp_path / "key"
    path.write_bytes(b"short\n")
    path.chmod(0o600)
    with pytest.raises(EndpointError, match="at least"):
        load_key_file(str(path))


def test_sign_and_verify():
    key = b"k" * 32
    frames = [bytes(f) for f in encode_request(1, "x", {"a": np.arange(10, dtype=np.int64)})]
    signed = sign_frames(key, frames)
    assert len(signed) == len(frames) + 1 and len(signed[0]) == 32
    assert [bytes(f) for f in verify_frames(key, signed)] == frames
    with pytest.raises(AuthenticationError):
        verify_frames(b"x" * 32, signed)  # wrong key
    with pytest.raises(AuthenticationError):
        verify_frames(key, frames)  # unsigned
    tampered = list(signed)
    tampered[2] = b"\x01" + bytes(signed[2])[1:]
    with pytest.raises(AuthenticationError):
        verify_frames(key, tampered)
    # Moving a byte across a frame boundary keeps the concatenation but not the MAC.
    shifted = [signed[0], bytes(signed[1]) + bytes(signed[2])[:1], bytes(signed[2])[1:]]
    with pytest.raises(AuthenticationError):
        verify_frames(key, shifted)
    with pytest.raises(AuthenticationError):
        verify_frames(key, signed[:-1])  # a dropped frame


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(90)
def test_keyed_worker_serves_only_clients_with_the_key(tmp_path):
    key_file = tmp_path / "key"
    key = create_key_file(str(key_file))
    wrong = tmp_path / "wrong"
    create_key_file(str(wrong))
    endpoint = f"tcp://127.0.0.1:{_free_loopback_port()}"
    with WorkerProcess(ECHO, name="keyed", endpoint=endpoint, key_file=str(key_file),
                       request_timeout=10) as w:
        assert w.call("echo", {"x": 1})[0] == {"x": 1}
        with pytest.raises(EndpointError, match="loopback too"):  # our client will not talk there without one
            Client(endpoint, timeout=1.0)
        unsigned = zmq.Context.instance().socket(zmq.DEALER)  # another's: no key, dropped, no reply
        unsigned.setsockopt(zmq.LINGER, 0)
        unsigned.connect(endpoint)
        unsigned.send_multipart(encode_request(2, "echo", {"x": 2}))
        assert not unsigned.poll(1000)
        unsigned.close()
        with Client(endpoint, timeout=1.0, key=load_key_file(str(wrong))) as c:
            with pytest.raises(MicrokernelTimeout):
                c.call("echo", {"x": 3})
        with Client(endpoint, timeout=5.0, key=key) as c:
            r, arrays = c.call("add", arrays=[np.ones(3), np.ones(3)])
            assert np.array_equal(r["sum"], [2.0, 2.0, 2.0])
        assert w.ping()["pid"] == w.pid  # the worker survived the bad clients


@pytest.mark.timeout(60)
def test_client_with_key_ignores_an_unkeyed_server(echo_worker):
    with Client(echo_worker.endpoint, timeout=1.0, key=b"k" * 32) as c:
        with pytest.raises(MicrokernelTimeout):
            c.call("echo")  # the server's (unsigned) protocol-error reply is dropped
    assert echo_worker.call("echo", {"ok": 1})[0] == {"ok": 1}
