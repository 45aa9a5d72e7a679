"""The GPU daemon (a real process on real OpenCL: PoCL here) through the client
and the CLI: reference nets against pycaffe, custom layers, query_network,
HETERO:GPU,CPU, its life cycle, and a kill -9 in the middle of a request."""
from __future__ import annotations

import os
import re
import signal
import time

import numpy as np
import pytest

from core.errors import Error
from device_daemons.client import DaemonDied, IECore, InferenceError
from tests.daemon.conftest import assert_close, daemon_processes, run_mo, write_custom_ir
from tests.gpu.gpu_helpers import chain_ir, rand
from tests.support import caffe_outputs, call_in_thread, compare_with_caffe, convert_api

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
SLOW = np.full((1, 4), 100.0 + 3000, np.float32)  # the Spin kernel runs 3e9 dependent steps per value
FAST = np.arange(4, dtype=np.float32).reshape(1, 4)
CONV = {"kernel": "3,3", "strides": "1,1", "pads_begin": "1,1", "pads_end": "1,1", "output": 4, "group": 1}


@pytest.fixture(scope="module")
def ie():
    core = IECore(policy="auto")
    core.set_config({"INFERENCE_PRECISION_HINT": "f32"}, "CPU")  # the CPU references are compared to 1e-5
    yield core
    core.close()


@pytest.fixture(scope="module")
def mvn_net(tmp_path_factory):
    """Input -> conv -> relu -> MVN (no GPU kernel) -> conv -> softmax."""
    rng = np.random.default_rng(0)
    shape = (2, 4, 6, 5)
    layers = [("c1", "Convolution", CONV, {"weights": rand(rng, 4, 4, 3, 3)}, shape), ("r1", "ReLU", {}, None, shape),
              ("mvn", "MVN", {"eps": 1e-9}, None, shape),
              ("c2", "Convolution", CONV, {"weights": rand(rng, 4, 4, 3, 3), "biases": rand(rng, 4)}, shape),
              ("sm", "SoftMax", {"axis": 1}, None, shape)]
    d = tmp_path_factory.mktemp("mvn")
    chain_ir(d, shape, layers)
    return str(d / "chain_FP32.xml"), rand(rng, *shape)


@pytest.mark.parametrize("model", ["bvlc_googlenet", "ssd_small", "conv_bn_scale"])
def test_reference_nets_on_the_gpu_daemon_equal_pycaffe(ie, bvlc_models, small_nets, tmp_path, model):
    from ir import write_ir
    proto, weights = (bvlc_models if model == "bvlc_googlenet" else small_nets)[model]
    xml = str(tmp_path / "model.xml")
    write_ir(convert_api(input_model=weights, input_proto=proto, batch=1), xml)
    net = ie.read_network(xml)
    exec_net = ie.load_network(net, "GPU")
    assert exec_net.device == "GPU"
    rng = np.random.default_rng(3)
    inputs = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in net.inputs.items()}
    compare_with_caffe(exec_net.infer(inputs), caffe_outputs(proto, weights, inputs), 1e-4)
    exec_net.close()


@pytest.mark.parametrize("on_cpu", ["detection_out", "conv1_norm_mbox_priorbox", "conv2_mbox_loc_perm"])
def test_hetero_at_another_batch_with_tensors_whose_batch_is_not_dim_0(ie, small_nets, tmp_path, on_cpu):
    """A PriorBox's output is [1, 2, N] at any batch, a Permute moves the batch: the tensors between HETERO's
    parts get the shapes the parts compute, not the batch on dim 0 (every request failed at batch 3)."""
    from ir import write_ir
    proto, weights = small_nets["ssd_small"]
    xml = str(tmp_path / "ssd.xml")
    write_ir(convert_api(input_model=weights, input_proto=proto, batch=1), xml)
    x = np.random.default_rng(4).standard_normal((3, 3, 32, 32)).astype(np.float32)
    net = ie.read_network(xml)
    net.batch_size = 3
    ref = ie.load_network(net, "CPU").infer({"data": x})
    net.affinity[on_cpu] = "CPU"
    hetero = ie.load_network(net, "HETERO:GPU,CPU")
    assert len(hetero.parts) > 1
    out = hetero.infer({"data": x})
    for key, value in ref.items():
        assert_close(out[key], value, 1e-4)
    hetero.close()


def test_tiny_net_batches_and_async_requests(ie, tiny):
    net = ie.read_network(tiny.xml)
    net.batch_size = 3
    exec_net = ie.load_network(net, "GPU", num_requests=2)
    x = tiny.input(5, batch=3)
    requests = [exec_net.start_async({"data": x}, request_id=i) for i in range(2)]
    for req in requests:
        req.wait()
        assert_close(req.outputs["prob"], tiny.reference(x))
    status = ie.get_versions("GPU")["GPU"]
    assert status["pid"] == ie.daemon_pid("GPU")


def test_local_requests_take_the_local_carrier(tiny, fresh_runtime):
    """One request path for every daemon: a local client's requests are 8-byte bound
    requests on the local carrier, computed without a hand-off."""
    core = IECore(policy="auto")
    try:
        exec_net = core.load_network(core.read_network(tiny.xml), "GPU")
        x = tiny.input(7)
        for _ in range(30):
            assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x))
        assert core._link("GPU").call("status")[0]["local_requests"] >= 25
    finally:
        core.close()


def test_custom_layers_through_the_daemon(ie, tmp_path):
    """add_extension(.xml, "GPU"): the guide's ReLU with its slope define, and a
    .cl with a syntax error: a clear error with the build log and the file."""
    rng = np.random.default_rng(1)
    shape = (1, 3, 5, 4)
    chain_ir(tmp_path, shape, [("relu", "ReLU", {"negative_slope": 0.25}, None, shape)])
    net = ie.read_network(str(tmp_path / "chain_FP32.xml"))
    core = IECore(policy="auto")
    assert core.add_extension(os.path.join(DATA, "relu.xml"), "GPU") == ["ReLU"]
    x = rand(rng, *shape)
    out = core.load_network(net, "GPU").infer({"data": x})["relu"]
    np.testing.assert_allclose(out, np.where(x < 0, x * np.float32(0.25), x), rtol=1e-6)
    assert core.add_extension(os.path.join(DATA, "broken.xml"), "GPU") == ["Broken"]
    base = str(tmp_path / "broken")
    write_custom_ir(base, "Broken")
    with pytest.raises(InferenceError) as err:
        core.load_network(core.read_network(base + ".xml"), "GPU")
    assert err.value.kind == "kernel"
    assert "broken_kernel.cl" in str(err.value) and "expected ';'" in str(err.value)
    core.close()


def test_query_network_per_device(ie, mvn_net):
    net = ie.read_network(mvn_net[0])
    gpu = ie.query_network(net, "GPU")
    assert gpu == {"data": "GPU", "c1": "GPU", "r1": "GPU", "c2": "GPU", "sm": "GPU"}
    assert set(ie.query_network(net, "CPU")) == {"data", "c1", "r1", "mvn", "c2", "sm"}
    assert ie.query_network(net, "HETERO:GPU,CPU")["mvn"] == "CPU"


def test_a_layer_beyond_a_gpu_kernels_limits_is_not_reported_supported(ie, tmp_path):
    """A Permute over 7 non-contiguous axes (the GPU's copy kernel takes 6): query_network leaves it to the
    next device, so HETERO runs it on the CPU (it said GPU, then the load failed)."""
    from tests.cpu.cpu_helpers import single_layer_ir
    shape = (2, 3, 2, 3, 2, 3, 2)
    order = tuple(reversed(range(7)))
    single_layer_ir(tmp_path, "Permute", {"order": ",".join(map(str, order))}, [shape],
                    [tuple(shape[a] for a in order)], name="perm")
    net = ie.read_network(str(next(tmp_path.glob("*.xml"))))
    assert "perm" not in ie.query_network(net, "GPU")
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    hetero = ie.load_network(net, "HETERO:GPU,CPU")
    np.testing.assert_array_equal(hetero.infer({"in0": x})["perm"], x.transpose(order))
    hetero.close()


def test_a_layer_the_gpu_lacks_fails_on_gpu_and_runs_with_hetero(ie, mvn_net):
    xml, x = mvn_net
    net = ie.read_network(xml)
    with pytest.raises(InferenceError, match="'MVN' is not supported by the GPU plugin.*HETERO:GPU,CPU") as err:
        ie.load_network(net, "GPU")
    assert err.value.kind == "network"
    hetero = ie.load_network(net, "HETERO:GPU,CPU")
    assert [p.device for p in hetero.parts] == ["GPU", "CPU", "GPU"]
    ref = ie.load_network(net, "CPU").infer({"data": x})
    out = hetero.infer({"data": x})
    assert_close(out["sm"], ref["sm"], 1e-5)
    req = hetero.start_async({"data": x})
    req.wait()
    assert_close(req.outputs["sm"], ref["sm"], 1e-5)
    assert list(hetero.config) == ["1:GPU", "2:CPU", "3:GPU"]  # each part's load config
    # what the device reports (the GPU's precision and optimum; HETERO: the most any part wants)
    assert hetero.parts[0].get_metric("OPTIMAL_NUMBER_OF_INFER_REQUESTS") >= 1
    assert hetero.get_metric("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == max(
        p.get_metric("OPTIMAL_NUMBER_OF_INFER_REQUESTS") for p in hetero.parts)
    assert hetero.parts[0].get_config("INFERENCE_PRECISION_HINT") == "f32"
    # inputs copied at the start (a refilled buffer does not reach the running request); a running
    # request refuses a restart, as IE's REQUEST_BUSY
    buf = x.copy()
    req = hetero.start_async(request_id=0, inputs={"data": buf})
    buf[...] = 0
    with pytest.raises(Error, match="REQUEST_BUSY"):  # (three parts on PoCL: milliseconds, still running)
        hetero.start_async(request_id=0, inputs={"data": buf})
    req.wait()
    assert_close(req.outputs["sm"], ref["sm"], 1e-5)
    # a completion callback that starts the request again from its own thread
    statuses = []

    def again(status, n):
        statuses.append(status)
        if n:
            req.set_completion_callback(again, n - 1)
            req.async_infer({"data": x})
    assert type(req)(hetero).wait() == -11  # INFER_NOT_STARTED
    req.set_completion_callback(again, 1)
    req.async_infer({"data": x})
    deadline = time.monotonic() + 60
    while len(statuses) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert statuses == [0, 0]
    req.wait()
    assert_close(req.outputs["sm"], ref["sm"], 1e-5)
    req.set_completion_callback(None)
    with pytest.raises(Error, match="request_id 3 is not one of the network's requests"):
        hetero.start_async(request_id=3, inputs={"data": x})
    hetero.close()
    with pytest.raises(Error, match="was closed; load it again"):
        hetero.infer({"data": x})
    net.affinity["c1"] = "CPU"  # a per-layer override
    hetero = ie.load_network(net, "HETERO:GPU,CPU")
    assert [(p.device, p.layers) for p in hetero.split.parts] == [("CPU", ["c1"]), ("GPU", ["r1"]),
                                                                  ("CPU", ["mvn"]), ("GPU", ["c2", "sm"])]
    assert_close(hetero.infer({"data": x})["sm"], ref["sm"], 1e-5)
    hetero.close()
    nhwc = ie.read_network(xml)  # IE's input_info layout: the caller's NHWC array transposed for the IR
    nhwc.input_info["data"].layout = "NHWC"
    hetero = ie.load_network(nhwc, "HETERO:GPU,CPU")
    assert_close(hetero.infer({"data": x.transpose(0, 2, 3, 1)})["sm"], ref["sm"], 1e-5)
    assert hetero.input_info["data"].layout == "NHWC"
    req = hetero.requests[0]  # IE's blobs: filled in the caller's layout, run without inputs
    req.input_blobs["data"].buffer[:] = x.transpose(0, 2, 3, 1)
    req.infer()
    assert_close(req.output_blobs["sm"].buffer, ref["sm"], 1e-5)
    hetero.close()


def test_perf_counts_on_the_gpu_and_with_hetero(ie, tiny, mvn_net):
    """PERF_COUNT is every daemon's: the GPU names its OpenCL steps and the ReLU it
    fused; HETERO lists each part's layers prefixed by the part's device."""
    exec_net = ie.load_network(ie.read_network(tiny.xml), "GPU", config={"PERF_COUNT": "YES"})
    request = exec_net.requests[0]
    x = tiny.input(6)
    assert_close(request.infer({"data": x})["prob"], tiny.reference(x))
    counts = request.get_perf_counts()
    assert counts["conv1"]["exec_type"] == "opencl" and counts["conv1"]["status"] == "EXECUTED"
    assert counts["conv1"]["real_time"] > 0
    assert counts["relu1"]["status"] == "NOT_RUN" and counts["relu1"]["exec_type"] == "fused into conv1"
    assert {counts[n]["layer_type"] for n in ("pool1", "fc1", "prob")} == {"Pooling", "FullyConnected", "SoftMax"}
    exec_net.close()

    xml, x = mvn_net
    hetero = ie.load_network(ie.read_network(xml), "HETERO:GPU,CPU", config={"PERF_COUNT": "YES"})
    request = hetero.requests[0]
    ref = ie.load_network(ie.read_network(xml), "CPU").infer({"data": x})
    assert_close(request.infer({"data": x})["sm"], ref["sm"], 1e-5)
    counts = request.get_perf_counts()
    assert [n for n in counts if n in ("c1", "mvn", "c2", "sm")] == ["c1", "mvn", "c2", "sm"]  # execution order
    assert counts["c1"]["exec_type"] == "GPU opencl" and counts["c2"]["exec_type"] == "GPU opencl"
    assert counts["mvn"]["exec_type"].startswith("CPU ") and counts["mvn"]["status"] == "EXECUTED"
    assert counts["r1"]["exec_type"] == "GPU fused into c1"
    req = hetero.start_async({"data": x})
    req.wait()
    assert set(req.get_perf_counts()) == set(counts)
    hetero.close()
    plain = ie.load_network(ie.read_network(xml), "HETERO:GPU,CPU")
    plain.requests[0].infer({"data": x})
    with pytest.raises(Exception, match="PERF_COUNT"):
        plain.requests[0].get_perf_counts()
    plain.close()


def test_cli_gpu_hetero_and_custom_layers(mvn_net, tiny, tmp_path, fresh_runtime):
    xml, x = mvn_net
    np.save(tmp_path / "x.npy", x)
    proc = run_mo("infer", "-m", xml, "-d", "HETERO:GPU,CPU", "-i", str(tmp_path / "x.npy"), "-o",
                  str(tmp_path / "out.npz"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "split over HETERO:GPU,CPU (3 parts)" in proc.stdout
    assert "part 2: CPU, 1 layer(s): mvn" in proc.stdout
    proc = run_mo("infer", "-m", xml, "-d", "HETERO:GPU,CPU", "--affinity", "sm=CPU", timeout=300)
    assert proc.returncode == 0 and "part 3: GPU, 1 layer(s): c2" in proc.stdout, proc.stdout + proc.stderr
    proc = run_mo("infer", "-m", tiny.xml, "-d", "GPU", "-c", os.path.join(DATA, "relu.xml"), "--top_k", "2")
    assert proc.returncode == 0 and "GPU custom layers from" in proc.stdout and "ReLU" in proc.stdout, proc.stderr
    proc = run_mo("infer", "-m", tiny.xml, "-d", "GPU", "-l", os.path.join(DATA, "relu.xml"))
    assert proc.returncode == 1 and "[ ERROR ]" in proc.stderr and "-l gives custom kernels for CPU only" \
        in proc.stderr
    proc = run_mo("benchmark", "-m", tiny.xml, "-d", "GPU", "-niter", "8", "-nireq", "2", timeout=300)
    assert proc.returncode == 0, proc.stderr
    proc = run_mo("benchmark", "-m", xml, "-d", "HETERO:GPU,CPU", "-niter", "4", "-hint", "throughput", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"Settings: +part 1 \(GPU\): inference precision f32, optimal requests \d; part 2 \(CPU\)",
                     proc.stdout), proc.stdout
    status = run_mo("daemon", "status")
    assert "GPU" in status.stdout and "CPU" in status.stdout
    assert run_mo("daemon", "stop", "--all").returncode == 0


def test_gpu_n_daemons_and_device_errors(fresh_runtime):
    proc = run_mo("daemon", "start", "--device", "GPU.0")
    assert proc.returncode == 0, proc.stderr
    assert "GPU.0 daemon started" in proc.stdout
    assert os.path.isfile(os.path.join(fresh_runtime, "daemon-gpu.0.json"))
    assert "GPU.0" in run_mo("daemon", "status").stdout
    assert run_mo("daemon", "stop", "--device", "gpu.0").returncode == 0
    proc = run_mo("daemon", "start", "--device", "GPU.99")
    assert proc.returncode == 1 and "[ ERROR ]" in proc.stderr and "asks for OpenCL device 99" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_mo("daemon", "start", "--device", "GPU", env={"MO_CORE_OPENCL_DEVICE": "no-such-device"})
    assert proc.returncode == 1 and "names no OpenCL device; the devices are 0:" in proc.stderr
    proc = run_mo("daemon", "start", "--device", "GPU", "--caffe-fallback")
    assert proc.returncode == 1 and "option of the CPU daemon" in proc.stderr
    assert daemon_processes(fresh_runtime) == []


@pytest.mark.timeout(180)
def test_gpu_daemon_killed_during_a_request(fresh_runtime, tmp_path):
    base = str(tmp_path / "spin")
    write_custom_ir(base, "Spin")
    ie = IECore(policy="auto", timeout=120)
    assert ie.add_extension(os.path.join(DATA, "spin.xml"), "GPU") == ["Spin"]
    exec_net = ie.load_network(ie.read_network(base + ".xml"), "GPU")
    np.testing.assert_array_equal(exec_net.infer({"data": FAST})["custom1"], FAST * 2 + 1)
    pid = ie.daemon_pid("GPU")
    assert daemon_processes(fresh_runtime) == [pid]
    th, outcome = call_in_thread(lambda: exec_net.infer({"data": SLOW}))
    time.sleep(1.5)  # the request is in the kernel's loop now
    assert "seconds" not in outcome
    os.kill(pid, signal.SIGKILL)
    th.join(30)
    assert not th.is_alive()
    err = outcome.get("error")
    assert isinstance(err, DaemonDied), outcome
    assert outcome["seconds"] < 10
    text = str(err)
    assert f"pid {pid}" in text and "killed by signal SIGKILL" in text and "GPU" in text
    # the next request starts a new GPU daemon and loads the network and its custom layer again
    np.testing.assert_array_equal(exec_net.infer({"data": FAST})["custom1"], FAST * 2 + 1)
    new_pid = ie.daemon_pid("GPU")
    assert new_pid != pid and daemon_processes(fresh_runtime) == [new_pid]
    ie.close()
    assert run_mo("daemon", "stop", "--device", "GPU").returncode == 0
    assert daemon_processes(fresh_runtime) == []
