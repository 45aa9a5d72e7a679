"""IECore / ExecutableNetwork against a real CPU daemon, checked against pycaffe."""
from __future__ import annotations

import gc

import numpy as np
import pytest

from core.errors import Error
from device_daemons.client import (DaemonError, DaemonNotRunning, IECore, InferenceError, StatusCode)
from tests.daemon.conftest import F32, assert_close
from tests.support import run_in_threads


@pytest.fixture(scope="module")
def ie():
    core = IECore(policy="auto", timeout=60)
    core.set_config(F32, "CPU")  # compared with pycaffe to 1e-4
    yield core
    core.close()


@pytest.mark.timeout(120)
def test_infer_equals_pycaffe(ie, tiny):
    net = ie.read_network(model=tiny.xml, weights=tiny.bin)
    assert net.inputs == {"data": [1, 3, 16, 16]}
    assert net.outputs == {"prob": [1, 10]}
    exec_net = ie.load_network(net, "CPU")
    assert exec_net.inputs == {"data": [1, 3, 16, 16]} and exec_net.outputs == {"prob": [1, 10]}
    for seed in range(3):
        x = tiny.input(seed)
        res = exec_net.infer({"data": x})
        assert list(res) == ["prob"] and res["prob"].dtype == np.float32
        assert_close(res["prob"], tiny.reference(x))
    exec_net.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("options", [dict(shared_memory=False), dict(transfer="content"),
                                     dict(shared_memory=False, transfer="content")])
def test_transfer_modes(tiny, options):
    """Array frames instead of shared memory; IR content instead of paths (remote clients)."""
    x = tiny.input(11)
    with IECore(**options) as core:
        exec_net = core.load_network(core.read_network(tiny.xml), "CPU", config=F32)
        out = exec_net.infer({"data": x})["prob"]
        assert_close(out, tiny.reference(x))
        out[...] = 0  # the caller's, on every path (frames decode read-only: the fallback copies them)
        # without shared memory no local carrier: the fallback, arrays as frames (test_request_path.py)
        assert (exec_net._loaded[0].carrier is None) is (options.get("shared_memory") is False)


@pytest.mark.timeout(120)
def test_start_async_and_request_slots(ie, tiny):
    exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU", num_requests=3)
    xs = [tiny.input(20 + i) for i in range(3)]
    reqs = [exec_net.start_async({"data": x}) for x in xs]
    for req, x in zip(reqs, xs):
        assert req.wait() == StatusCode.OK
        assert_close(req.outputs["prob"], tiny.reference(x))
        assert req.latency is not None and req.latency > 0
    # IE's own form: start_async(request_id, inputs) on the request slots
    for i, x in enumerate(xs):
        exec_net.start_async(request_id=i, inputs={"data": x})
    for i, x in enumerate(xs):
        assert exec_net.requests[i].wait(-1) == StatusCode.OK
        assert_close(exec_net.requests[i].outputs["prob"], tiny.reference(x))
    assert_close(exec_net.requests[0].infer({"data": xs[2]})["prob"], tiny.reference(xs[2]))
    with pytest.raises(Error, match=r"request_id 3 is not one of the network's requests \(0 to 2"):
        exec_net.start_async(request_id=3, inputs={"data": xs[0]})


@pytest.mark.timeout(120)
def test_close_unloads_the_networks_still_alive(tiny):
    """IECore.close() with an ExecutableNetwork still referenced: the network is unloaded
    from the daemon (before, the closed connection let its finalizer skip the unload)."""
    def held(name):
        with IECore() as other:
            return sum(n["name"] == name for n in other._link("CPU").call("status")[0]["networks"])
    gc.collect()  # (an earlier test's network of this name collected meanwhile would change the count)
    core = IECore()
    exec_net = core.load_network(core.read_network(tiny.xml), "CPU")
    name = exec_net.name
    before = held(name)
    core.close()
    assert held(name) == before - 1
    # close() is final: a request after it (a benchmark's thread still running, say) does not load it again
    with pytest.raises(Error, match="was closed"):
        exec_net.infer({"data": tiny.input(0)})
    assert held(name) == before - 1


@pytest.mark.timeout(120)
def test_batch_size(ie, tiny):
    net = ie.read_network(tiny.xml)
    net.batch_size = 3
    assert net.inputs == {"data": [3, 3, 16, 16]} and net.outputs == {"prob": [3, 10]}
    exec_net = ie.load_network(net, "CPU")
    assert exec_net.outputs == {"prob": [3, 10]}
    x = tiny.input(5, batch=3)
    assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x))
    # reshape() sets the batch too, as the Inference Engine reports it; it takes a dict
    net = ie.read_network(tiny.xml)
    net.reshape({"data": [4, 3, 16, 16]})
    assert net.batch_size == 4
    with pytest.raises(Error, match="reshape takes a dict"):
        net.reshape(None)


@pytest.mark.timeout(120)
def test_loading_the_same_ir_again_is_cached(ie, tiny, tmp_path):
    """The second load compiles nothing: counted by the daemon where it compiles
    (plans_built), not taken from the `cached` flag it reports."""
    import shutil
    xml = str(tmp_path / "copy.xml")  # an IR this daemon never saw
    shutil.copy(tiny.xml, xml)
    shutil.copy(tiny.bin, str(tmp_path / "copy.bin"))
    built = lambda: ie._link("CPU").call("status")[0]["plans_built"]  # noqa: E731
    before = built()
    first = ie.load_network(ie.read_network(xml), "CPU")
    assert built() == before + 1 and not first.cached
    second = ie.load_network(ie.read_network(xml), "CPU")
    assert built() == before + 1 and second.cached
    assert second._loaded[1] != first._loaded[1]  # a handle of its own on the same plans
    x = tiny.input(3)
    assert_close(second.infer({"data": x})["prob"], tiny.reference(x))
    assert_close(first.infer({"data": x})["prob"], tiny.reference(x))
    first.close()
    assert_close(second.infer({"data": x})["prob"], tiny.reference(x))


@pytest.mark.timeout(120)
def test_input_errors_are_clear(ie, tiny):
    exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU")
    with pytest.raises(InferenceError, match=r"no input named 'image'.*'data'") as err:
        exec_net.infer({"image": tiny.input(0)})
    assert err.value.kind == "input"
    with pytest.raises(InferenceError, match=r"shape \[1, 3, 8, 8\].*\[1, 3, 16, 16\]"):
        exec_net.infer({"data": np.zeros((1, 3, 8, 8), np.float32)})
    with pytest.raises(InferenceError, match=r"missing 'data'"):
        exec_net.infer({})
    with pytest.raises(InferenceError, match="takes a dict"):
        exec_net.infer([tiny.input(0)])
    with pytest.raises(InferenceError, match="dtype"):
        exec_net.infer({"data": np.array(["a"])})
    # the daemon is still fine
    x = tiny.input(4)
    assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x))


@pytest.mark.timeout(300)
def test_eight_threads_share_one_exec_net(ie, tiny):
    """8 client threads x 200 requests on one ExecutableNetwork: each thread sends its
    own input and must get its own result back, every time (1600 correct replies)."""
    exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU")
    inputs = [tiny.input(100 + t) for t in range(8)]
    refs = [tiny.reference(x) for x in inputs]
    # the references differ from each other, so a mixed-up reply cannot pass
    assert min(np.max(np.abs(refs[i] - refs[j])) for i in range(8) for j in range(i)) > 1e-3
    correct = [0] * 8
    errors = []

    def worker(t):
        try:
            for i in range(200):
                if i % 4 == 3:  # some requests through the async (shared client) path too
                    req = exec_net.start_async({"data": inputs[t]})
                    req.wait()
                    out = req.outputs["prob"]
                else:
                    out = exec_net.infer({"data": inputs[t]})["prob"]
                assert_close(out, refs[t])
                correct[t] += 1
        except BaseException as exc:  # reported below
            errors.append((t, exc))

    run_in_threads(worker, 8)
    assert not errors, errors[:3]
    assert sum(correct) == 1600


@pytest.mark.timeout(60)
def test_existing_policy_without_daemon(fresh_runtime, tiny):
    core = IECore(policy="existing")
    net = core.read_network(tiny.xml)
    with pytest.raises(DaemonNotRunning, match="mo-core daemon start"):
        core.load_network(net, "CPU")


@pytest.mark.timeout(60)
def test_bad_device_and_arguments(ie, tiny):
    net = ie.read_network(tiny.xml)
    with pytest.raises(DaemonError, match="unknown device 'GPU.X'"):
        ie.load_network(net, "GPU.X")
    with pytest.raises(DaemonError, match="unknown device 'TPU'"):
        ie.load_network(net, "TPU")
    with pytest.raises(Exception, match="policy"):
        IECore(policy="sometimes")
    with pytest.raises(Exception, match="batch_size"):
        net.batch_size = 0


@pytest.mark.timeout(60)
def test_read_network_validates_locally(ie, tmp_path):
    from ir import IRError
    bad = tmp_path / "bad.xml"
    bad.write_text("<net name='x' version='2'><layers><layer id='0'")
    with pytest.raises(IRError):
        ie.read_network(str(bad))
    with pytest.raises(IRError, match="cannot find"):
        ie.read_network(str(tmp_path / "missing.xml"))


@pytest.mark.timeout(60)
def test_outputs_from_shared_memory_stay_valid(ie, tiny):
    """Outputs are views of a lent shared-memory slot: later requests must not
    overwrite outputs the caller still holds."""
    exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU")
    kept = [(seed, exec_net.infer({"data": tiny.input(seed)})["prob"]) for seed in range(40)]
    for seed, out in kept:
        assert_close(out, tiny.reference(tiny.input(seed)))
    out = kept[0][1]
    out[...] = 0  # the caller owns it
    del kept
    assert_close(exec_net.infer({"data": tiny.input(1)})["prob"], tiny.reference(tiny.input(1)))


@pytest.mark.timeout(60)
def test_a_request_alone_gets_the_team_size_measured_faster(ie, tiny):
    """The daemon times a network's requests on its whole OpenMP team and on one thread, alternately
    (device_daemons/cpu/plan_pool.py: TeamChoice), then keeps the faster: its status says which (None while
    measuring); every answer is right whichever team computed it."""
    from device_daemons.cpu.plan_pool import CHOICE_REQUESTS
    net = ie.read_network(tiny.xml)
    net.batch_size = 5  # (a network of its own in the daemon: the other tests' requests measured theirs)
    exec_net = ie.load_network(net, "CPU")
    team = exec_net.get_config("INFERENCE_NUM_THREADS")

    def chosen():
        status, _ = exec_net.link.call("status")
        return next(n for n in status["networks"] if n["handle"] == exec_net._loaded[1])["threads"]
    assert chosen() is None if team > 1 else chosen() == 1, team
    for i in range(CHOICE_REQUESTS):
        x = tiny.input(i, batch=5)
        assert_close(exec_net.infer({"data": x})["prob"], tiny.reference(x))
    assert chosen() in {1, team}


@pytest.mark.timeout(60)
def test_reshape_verb_and_status(ie, tiny):
    """The daemon's reshape verb (per handle: other handles keep their shapes)."""
    exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU")
    other = ie.load_network(ie.read_network(tiny.xml), "CPU")
    link = exec_net.link
    handle = exec_net._loaded[1]
    result, _ = link.call("reshape", {"handle": handle, "shapes": {"data": [2, 3, 16, 16]}})
    assert result["handle"] == handle and result["outputs"]["prob"]["shape"] == [2, 10]
    x = tiny.input(8, batch=2)
    out, _ = link.call("infer", {"handle": handle, "inputs": {"data": x}})
    assert_close(out["outputs"]["prob"], tiny.reference(x))
    x1 = tiny.input(8)
    assert_close(other.infer({"data": x1})["prob"], tiny.reference(x1))
    status, _ = link.call("status")
    assert status["device"] == "CPU" and status["pid"] == ie.daemon_pid() and status["requests"] >= 2
    handles = {n["handle"]: n for n in status["networks"]}
    assert handles[handle]["inputs"] == {"data": [2, 3, 16, 16]} and handles[handle]["name"] == "tiny"
    with pytest.raises(InferenceError, match="no input named 'nope'"):
        link.call("reshape", {"handle": handle, "shapes": {"nope": [1, 2]}})


@pytest.mark.timeout(60)
def test_world_writable_kernel_file_is_refused(ie, tmp_path, slow_model):
    import os
    from tests.daemon.conftest import SLOW_KERNEL
    path = tmp_path / "kernel.py"
    path.write_text(SLOW_KERNEL)
    os.chmod(path, 0o666)
    with pytest.raises(InferenceError, match="not writable by group or others"):
        ie.add_extension(str(path))



COLLECTED_WHILE_LOCKED = """
import gc, sys, time
import numpy as np
from device_daemons.client import IECore, daemon
ie = IECore()
net = ie.load_network(ie.read_network(sys.argv[1]), "CPU", config={"INFERENCE_PRECISION_HINT": "f32"})
net.infer({"data": np.zeros((1, 3, 16, 16), np.float32)})  # its bound requests hold slots of the connection
conn = net.loaded(time.monotonic() + 30)[0]
net.cycle = net  # only the collector frees it
del net
with conn.slots._lock:  # as a request taking a slot holds it when a collection starts on its thread
    gc.collect()        # the finalizer must not wait for this thread
print("collected", flush=True)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:  # the unload happens on the reaper's thread
    if all(not e.get("networks") for e in daemon.status()):
        print("unloaded", flush=True)
        break
    time.sleep(0.05)
ie.close()
"""


@pytest.mark.timeout(180)
def test_a_collected_network_is_cleaned_up_off_the_collecting_thread(tiny, tmp_path):
    """A collection can start on a thread that holds the connection's slot lock; the
    finalizer of an ExecutableNetwork nobody references any more gives its slots back
    under that lock: it hands the work to the reaper's thread instead of deadlocking."""
    import os
    import subprocess
    import sys

    from tests.support import REPO
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    env = dict(os.environ, PYTHONPATH=REPO, MO_CORE_RUNTIME_DIR=str(runtime))
    try:
        proc = subprocess.run([sys.executable, "-c", COLLECTED_WHILE_LOCKED, tiny.xml], capture_output=True,
                              text=True, timeout=120, env=env)
    finally:
        subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env, cwd=REPO,
                       capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["collected", "unloaded"], (proc.stdout, proc.stderr[-2000:])


@pytest.mark.timeout(120)
def test_start_async_copies_its_inputs_and_a_busy_request_refuses_a_restart(slow_model):
    """IE's pattern: one input buffer refilled per frame right after start_async. The
    fifth request waits for one of the network's four request threads; it used to read
    the caller's buffer only then, computing on the next frame."""
    xml, kernel = slow_model
    with IECore(timeout=60) as core:
        core.add_extension(kernel, "CPU")
        exec_net = core.load_network(core.read_network(xml), "CPU", num_requests=1)
        slow = np.full((1, 4), 101.0, np.float32)  # the SlowOp kernel sleeps 1 s on it
        first = exec_net.start_async(request_id=0, inputs={"data": slow})
        with pytest.raises(Error, match="REQUEST_BUSY: the request 0 is still running"):
            exec_net.start_async(request_id=0, inputs={"data": slow})
        others = [exec_net.start_async({"data": slow}) for _ in range(3)]
        buf = np.arange(4, dtype=np.float32).reshape(1, 4)
        queued = exec_net.start_async({"data": buf})
        buf[...] = 7.0  # the next frame, while `queued` has not been sent
        for req in [first] + others:
            assert req.wait() == StatusCode.OK
        assert queued.wait() == StatusCode.OK
        np.testing.assert_array_equal(queued.outputs["custom1"], np.arange(4).reshape(1, 4) * 2 + 1)
        exec_net.close()


@pytest.mark.timeout(120)
def test_completion_callbacks_and_idle_requests(ie, tiny):
    """IE's async idioms: a completion callback per request (outputs set when it runs, and
    it may start the request again), get_idle_request_id, wait() on a request never
    started (INFER_NOT_STARTED)."""
    import threading
    exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU", num_requests=2)
    assert exec_net.requests[1].wait() == StatusCode.INFER_NOT_STARTED
    assert exec_net.get_idle_request_id() == 0
    xs = [tiny.input(40 + i) for i in range(4)]
    seen, done = [], threading.Event()
    req = exec_net.requests[0]

    def callback(status, frame):
        seen.append((status, frame, req.outputs["prob"].copy()))
        if frame + 1 < len(xs):
            req.set_completion_callback(callback, frame + 1)
            req.async_infer({"data": xs[frame + 1]})
        else:
            done.set()
    req.set_completion_callback(callback, 0)
    req.async_infer({"data": xs[0]})
    assert done.wait(60)
    assert [(s, f) for s, f, _ in seen] == [(StatusCode.OK, i) for i in range(4)]
    for (_, frame, out) in seen:
        assert_close(out, tiny.reference(xs[frame]))
    exec_net.close()


@pytest.mark.timeout(120)
def test_input_info_as_the_inference_engine_has_it(ie, tiny):
    """Code ported from IE: input_info[name].input_data.shape, precision "U8" (a uint8 image
    works), layout "NHWC" (the client transposes to the IR's NCHW); outputs[name].shape."""
    net = ie.read_network(tiny.xml)
    name = next(iter(net.input_info))
    info = net.input_info[name]
    assert info.input_data.shape == [1, 3, 16, 16] and info.precision == "FP32" and info.layout == "NCHW"
    assert net.outputs["prob"].shape == [1, 10] and net.inputs == {"data": [1, 3, 16, 16]}
    info.precision = "U8"
    info.layout = "NHWC"
    with pytest.raises(Error, match=r"layout 'NC' is not one of NCHW, NHWC"):
        info.layout = "NC"
    with pytest.raises(Error, match="precision 'FP64' is not one of"):
        info.precision = "FP64"
    exec_net = ie.load_network(net, "CPU")
    assert exec_net.input_info[name].layout == "NHWC" and exec_net.input_info[name].precision == "U8"
    with pytest.raises(Error, match="cannot change"):
        exec_net.input_info[name].layout = "NCHW"
    image = np.random.default_rng(9).integers(0, 255, (1, 16, 16, 3), dtype=np.uint8)
    expected = tiny.reference(image.transpose(0, 3, 1, 2).astype(np.float32))
    assert_close(exec_net.infer({name: image})["prob"], expected)
    req = exec_net.start_async({name: image})
    req.wait()
    assert_close(req.outputs["prob"], expected)
    exec_net.close()


@pytest.mark.timeout(120)
def test_input_and_output_blobs(ie, tiny):
    """IE's blob idiom: fill request.input_blobs[name].buffer, infer() or async_infer() without
    inputs, read request.output_blobs[name].buffer."""
    exec_net = ie.load_network(ie.read_network(tiny.xml), "CPU", num_requests=1)
    req = exec_net.requests[0]
    blob = req.input_blobs["data"]
    assert blob.buffer.shape == (1, 3, 16, 16) and blob.tensor_desc.layout == "NCHW"
    for seed, run in ((30, lambda: req.infer()), (31, lambda: (req.async_infer(), req.wait()))):
        blob.buffer[:] = tiny.input(seed)
        run()
        assert_close(req.output_blobs["prob"].buffer, tiny.reference(tiny.input(seed)))
    assert req.input_blobs["data"] is blob  # (the same buffers each time)
    exec_net.close()
