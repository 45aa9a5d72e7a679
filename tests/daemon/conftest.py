"""Fixtures of the device daemon tests: REAL daemon processes over real ZeroMQ.

Every test session gets its own short runtime directory (MO_CORE_RUNTIME_DIR), so
the tests never see or touch a daemon of the user; tests that start, stop or kill
daemons get a fresh one of their own (`fresh_runtime`). Models are made with real
pycaffe and converted with `mo-core convert`.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

import numpy as np
import pytest

from tests.support import REPO, import_caffe, wait_until, write_text  # noqa: F401  (wait_until: for the tests)

TINY_PROTO = """name: "tiny"
input: "data"
input_shape { dim: 1 dim: 3 dim: 16 dim: 16 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 stride: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc1" type: "InnerProduct" bottom: "pool1" top: "fc1"
        inner_product_param { num_output: 10 } }
layer { name: "prob" type: "Softmax" bottom: "fc1" top: "prob" }
"""

# A custom CPU kernel (OpenCV style) used by the tests: y = 2x + 1; when the first
# input value is >= 100 it first sleeps (value - 100) seconds: a slow request. Before
# sleeping it creates the file "started" in $MO_CORE_TEST_SIGNAL_DIR (when set), so
# a test knows the request is running (see slow_request_started).
SLOW_KERNEL = '''
import os
import time


class SlowOp:
    type = "SlowOp"

    def __init__(self, layer):
        self.layer = layer

    def getMemoryShapes(self, input_shapes):
        return [tuple(input_shapes[0])]

    def forward(self, inputs):
        x = inputs[0]
        first = float(x.flat[0])
        if first >= 100:
            signal_dir = os.environ.get("MO_CORE_TEST_SIGNAL_DIR")
            if signal_dir:
                open(os.path.join(signal_dir, "started"), "w").close()
            time.sleep(first - 100)
        return [x * 2 + 1]
'''


def slow_request_started(signal_dir: str, timeout: float = 30.0) -> bool:
    """Wait until a SlowOp request of a daemon started with MO_CORE_TEST_SIGNAL_DIR=
    `signal_dir` is inside its sleep."""
    return wait_until(lambda: os.path.exists(os.path.join(signal_dir, "started")), timeout)


def run_mo(*args, timeout=120, env=None):
    """`python -m cli ...` in a fresh interpreter: CompletedProcess (text)."""
    full_env = dict(os.environ, PYTHONPATH=REPO, GLOG_minloglevel="2")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=full_env, timeout=timeout)


def _proc_text(pid: int, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except OSError:
        return b""


def daemon_processes(runtime: str) -> list[int]:
    """Pids of live (non-zombie) processes running device_daemons with `runtime` as
    their runtime directory (in the command line or the environment)."""
    marker_env = f"MO_CORE_RUNTIME_DIR={runtime}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        cmdline = _proc_text(pid, "cmdline")
        if b"device_daemons" not in cmdline:
            continue
        stat = _proc_text(pid, "stat")
        if not stat or stat[stat.rindex(b")") + 2:].split()[0] == b"Z":
            continue
        if runtime.encode() in cmdline or marker_env in _proc_text(pid, "environ").split(b"\0"):
            out.append(pid)
    return out


def cleanup_runtime(runtime: str) -> list[int]:
    """Stop every daemon of `runtime` (returns the pids that had to be killed)."""
    from device_daemons.client import daemon
    saved = os.environ.get("MO_CORE_RUNTIME_DIR")
    os.environ["MO_CORE_RUNTIME_DIR"] = runtime
    try:
        for device in daemon.running_devices():
            try:
                daemon.stop(device, grace=2.0)
            except Exception:  # noqa: BLE001 - the kill below is the backstop
                pass
    finally:
        if saved is None:
            os.environ.pop("MO_CORE_RUNTIME_DIR", None)
        else:
            os.environ["MO_CORE_RUNTIME_DIR"] = saved
    killed = daemon_processes(runtime)
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    _reap_children()
    return killed


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _new_runtime_dir(prefix: str) -> str:
    base = tempfile.mkdtemp(prefix=prefix)  # short: ipc paths are limited to 107 bytes
    return os.path.join(base, "rt")


@contextlib.contextmanager
def private_runtime(prefix: str, **env):
    """A runtime directory of its own (MO_CORE_RUNTIME_DIR, so the tests never see a
    daemon of the user) and the repo on PYTHONPATH, plus `env`, while the block runs;
    afterwards every daemon in it is stopped and the environment is as it was."""
    keys = ("MO_CORE_RUNTIME_DIR", "PYTHONPATH") + tuple(env)
    saved = {k: os.environ.get(k) for k in keys}
    runtime = _new_runtime_dir(prefix)
    os.environ["MO_CORE_RUNTIME_DIR"] = runtime
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, saved["PYTHONPATH"]) if p)
    os.environ.update(env)
    try:
        yield runtime
    finally:
        cleanup_runtime(runtime)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(os.path.dirname(runtime), ignore_errors=True)


F32 = {"INFERENCE_PRECISION_HINT": "f32"}  # what parity tests load with


@contextlib.contextmanager
def private_iecore(prefix: str):
    """An IECore on daemons of a private runtime directory: the session fixtures of
    other test folders use it. Their tests compare with the frameworks to 1e-4 or
    so: the CPU computes in f32 (its default is bf16 where the CPU has it)."""
    from device_daemons.client import IECore
    with private_runtime(prefix):
        core = IECore(policy="auto")
        core.set_config(F32, "CPU")
        yield core


@pytest.fixture(scope="session", autouse=True)
def session_runtime():
    """A private runtime dir for the whole session; every daemon in it is stopped
    at the end (and the test fails loudly in the log if one had to be killed)."""
    with private_runtime("dd-", GLOG_minloglevel="2") as runtime:
        yield runtime


@pytest.fixture
def fresh_runtime(monkeypatch):
    """A runtime dir of this test only (its daemons are stopped afterwards)."""
    runtime = _new_runtime_dir("dt-")
    monkeypatch.setenv("MO_CORE_RUNTIME_DIR", runtime)
    yield runtime
    left = cleanup_runtime(runtime)
    shutil.rmtree(os.path.dirname(runtime), ignore_errors=True)
    assert not left, f"daemon processes were left behind and had to be killed: {left}"


def _fill_he(net, rng):
    for blobs in net.params.values():
        w = blobs[0].data
        fan_in = int(np.prod(w.shape[1:])) or 1
        w[...] = rng.standard_normal(w.shape) * np.sqrt(2.0 / fan_in)
        for b in blobs[1:]:
            b.data[...] = rng.standard_normal(b.data.shape) * 0.1


class TinyModel:
    """The tiny Caffe net converted to IR, with pycaffe as the reference."""

    def __init__(self, directory: str):
        caffe = import_caffe()
        self.proto = write_text(os.path.join(directory, "tiny.prototxt"), TINY_PROTO)
        self.weights = os.path.join(directory, "tiny.caffemodel")
        net = caffe.Net(self.proto, caffe.TEST)
        _fill_he(net, np.random.default_rng(7))
        net.save(self.weights)
        out = os.path.join(directory, "ir")
        proc = run_mo("convert", "--input_model", self.weights, "--input_proto", self.proto,
                      "--output_dir", out, "--silent")
        assert proc.returncode == 0, proc.stderr
        self.xml = os.path.join(out, "tiny.xml")
        self.bin = os.path.join(out, "tiny.bin")
        self._net = caffe.Net(self.proto, self.weights, caffe.TEST)
        self._lock = threading.Lock()

    def input(self, seed: int, batch: int = 1) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal((batch, 3, 16, 16)).astype(np.float32)

    def reference(self, x: np.ndarray) -> np.ndarray:
        """pycaffe's 'prob' for x (any batch). Thread-safe: one pycaffe net, one
        forward at a time (tests call it from several threads)."""
        rows = []
        with self._lock:
            for i in range(x.shape[0]):
                self._net.blobs["data"].data[...] = x[i:i + 1]
                rows.append(self._net.forward()["prob"].copy())
        return np.concatenate(rows)


def assert_close(out: np.ndarray, ref: np.ndarray, rtol: float = 1e-4):
    """|out - ref| <= rtol * max|ref| everywhere (shapes must agree)."""
    out = np.asarray(out)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    err = float(np.max(np.abs(out.astype(np.float64) - ref)))
    assert err <= rtol * float(np.max(np.abs(ref))), f"max error {err} vs max |ref| {np.max(np.abs(ref))}"


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> TinyModel:
    return TinyModel(str(tmp_path_factory.mktemp("tiny")))


def write_custom_ir(path_base: str, layer_type: str, shape=(1, 4), name: str = "custom1") -> str:
    """Input -> one layer of `layer_type` (a type with no built-in kernel); returns the .xml."""
    from ir import Edge, Layer, Network, Port, write_ir
    inp = Layer(0, "data", "Input", outputs=[Port(0, shape)])
    layer = Layer(1, name, layer_type, data={"note": "custom"}, inputs=[Port(0, shape)],
                  outputs=[Port(1, shape)])
    write_ir(Network("custom_net", [inp, layer], [Edge(0, 0, 1, 0)]), path_base + ".xml",
             path_base + ".bin")
    return path_base + ".xml"


@pytest.fixture(scope="session")
def slow_model(tmp_path_factory):
    """(xml of Input -> SlowOp, path of the SlowOp kernel file)."""
    d = tmp_path_factory.mktemp("slow")
    xml = write_custom_ir(str(d / "slow"), "SlowOp")
    kernel = write_text(str(d / "slow_kernel.py"), SLOW_KERNEL)
    return xml, kernel


def raw_socket(endpoint: str):
    """A bare DEALER socket, to send what a broken or hostile client would."""
    import zmq
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    return sock


def raw_reply(sock, timeout_ms: int = 3000):
    """The decoded header of the next reply on `sock`, None if none came in time."""
    import msgpack
    if not sock.poll(timeout_ms):
        return None
    return msgpack.unpackb(sock.recv_multipart()[0], raw=False)
