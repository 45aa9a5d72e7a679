"""The GPU daemon under hostile custom layers (issue 21, F6/F7), on real OpenCL (PoCL
here): a <Source filename> that is a FIFO, /dev/zero, an absolute path or a path
out of the .xml's directory is an error at once (no read, no block); a work size
of 2^64 is the file's error, not an internal one; an endless kernel leaves the
daemon answering `hello` and `status`, fails at its deadline, and the next request
gets a fresh daemon that computes correct results."""
from __future__ import annotations

import os
import shutil
import threading
import time

import numpy as np
import pytest

from core.microkernel import Client
from tests.daemon.conftest import private_runtime, write_custom_ir
from tests.support import call_in_thread, wait_until

pytestmark = pytest.mark.timeout(240)
GPU_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gpu", "data")
RELU = open(os.path.join(GPU_DATA, "relu.xml")).read()


@pytest.mark.parametrize("source,message", [
    ("fifo.cl", "not a regular file"),
    ("/dev/zero", "absolute path"),
    ("zero.cl", "outside the .xml's directory"),   # a link to /dev/zero
    ("../outside.cl", "outside the .xml's directory"),
    ("big.cl", "more than the 16 MB"),
])
def test_a_custom_layer_source_is_a_regular_file_beside_the_xml(tmp_path, source, message):
    from device_daemons.gpu.custom import CustomLayerError, CustomLayers
    layer_dir = tmp_path / "layer"
    layer_dir.mkdir()
    os.mkfifo(layer_dir / "fifo.cl")
    os.symlink("/dev/zero", layer_dir / "zero.cl")
    shutil.copy(os.path.join(GPU_DATA, "relu_kernel.cl"), tmp_path / "outside.cl")
    with open(layer_dir / "big.cl", "wb") as f:
        f.truncate((16 << 20) + 1)
    xml = layer_dir / "layer.xml"
    xml.write_text(RELU.replace('filename="relu_kernel.cl"', 'filename="{}"'.format(source)))
    done = {}
    thread = threading.Thread(target=lambda: done.setdefault("error", _error(CustomLayers, CustomLayerError, xml)))
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "reading the custom layer blocked"
    assert message in str(done["error"]), done


def _error(load, error_type, path):
    try:
        load(path)
    except error_type as exc:
        return exc
    return None


def test_a_work_size_past_size_t_is_the_files_error(tmp_path, gpu_device):
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.custom import CustomLayerError, CustomLayers
    from tests.gpu.test_gpu_custom_layers import conv_then
    shutil.copy(os.path.join(GPU_DATA, "relu_kernel.cl"), tmp_path)
    (tmp_path / "r.xml").write_text(RELU.replace('global="X,Y,B*F"', 'global="X*18446744073709551616,Y,B*F"'))
    network, _ = conv_then(("relu", "ReLU", {}, None, (2, 5, 7, 9)), "FP32", tmp_path)
    with pytest.raises(CustomLayerError, match="an OpenCL work size is 1 to 2"):
        GpuPlan(network, gpu_device, custom_layers=CustomLayers(tmp_path / "r.xml"))


def test_an_endless_kernel_leaves_the_daemon_responsive(tmp_path):
    from device_daemons import registry
    from device_daemons.client import DaemonDied, IECore, InferenceError
    fast = np.arange(4, dtype=np.float32).reshape(1, 4)
    endless = np.full((1, 4), 1e9, np.float32)  # the Spin kernel's loop count: (x - 100) million steps
    with private_runtime("gpuh-", MO_CORE_GPU_TIMEOUT="8"):
        base = str(tmp_path / "spin")
        write_custom_ir(base, "Spin")
        ie = IECore(policy="auto", timeout=60)
        ie.add_extension(os.path.join(GPU_DATA, "spin.xml"), "GPU")
        net = ie.load_network(ie.read_network(base + ".xml"), "GPU")
        np.testing.assert_array_equal(net.infer({"data": fast})["custom1"], fast * 2 + 1)
        record = registry.read_record("GPU")
        thread, box = call_in_thread(lambda: net.infer({"data": endless}))
        time.sleep(1.5)
        with Client(record["endpoint"], timeout=5) as client:
            assert client.call("hello", timeout=5)[0]["pid"] == record["pid"]
            assert client.call("status", timeout=5)[0]
        assert thread.is_alive()
        thread.join(60)
        assert isinstance(box.get("error"), InferenceError) and "did not finish" in str(box["error"]), box
        assert "MO_CORE_GPU_TIMEOUT" in str(box["error"])
        assert wait_until(lambda: not running(record["pid"]), 30), "the daemon holding the endless kernel stayed"
        try:
            result = net.infer({"data": fast})
        except DaemonDied:  # (a request that reached it as it went: lost, and said so)
            result = net.infer({"data": fast})
        np.testing.assert_array_equal(result["custom1"], fast * 2 + 1)  # computed by a fresh daemon
        assert registry.read_record("GPU")["pid"] != record["pid"]
        ie.close()


def running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        with open("/proc/{}/stat".format(pid)) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
