"""The GPU plan itself on real OpenCL: activation fusing, in-place layers, views,
memory shared by lifetime, concurrent requests, reshape, errors, device choice
and program builds."""
from __future__ import annotations

import numpy as np
import pytest

from tests.cpu.cpu_helpers import rel_err
from tests.gpu.gpu_helpers import both_plans, chain_ir, rand

CONV = {"kernel": "3,3", "strides": "1,1", "pads_begin": "1,1", "pads_end": "1,1", "output": 4, "group": 1}


def conv(name, rng, c=4, o=4):
    return (name, "Convolution", dict(CONV, output=o), {"weights": rand(rng, o, c, 3, 3), "biases": rand(rng, o)},
            None)


def with_shapes(layers, shape):
    return [layer[:4] + (shape,) for layer in layers]


def check(network, device, x, extra=None, **options):
    from device_daemons.cpu import ExecutionPlan
    from device_daemons.gpu import GpuPlan
    gpu = GpuPlan(network, device, extra_outputs=extra, **options)
    ref = ExecutionPlan(network, extra_outputs=extra).infer({"data": x})
    ours = gpu.infer({"data": x})
    assert sorted(ours) == sorted(ref)
    for key in ref:
        assert rel_err(ours[key], ref[key]) <= 1e-5, key
    return gpu


def test_an_activation_runs_in_the_epilogue_of_its_only_producer(tmp_path, gpu_device):
    rng = np.random.default_rng(0)
    shape = (2, 4, 6, 5)
    layers = with_shapes([conv("c1", rng), ("r1", "ReLU", {"negative_slope": 0.1}, None, None), conv("c2", rng),
                          ("clamp", "Clamp", {"min": -0.5, "max": 0.5}, None, None),
                          ("bn", "ScaleShift", {}, {"weights": rand(rng, 4), "biases": rand(rng, 4)}, None),
                          ("sig", "Activation", {"type": "sigmoid"}, None, None)], shape)
    plan = check(chain_ir(tmp_path, shape, layers), gpu_device, rand(rng, *shape))
    fused = {st.layer.name for st in plan.steps if st.fused}
    assert fused == {"r1", "clamp", "sig"}
    assert [st.kernel.act[0] for st in plan.steps if st.layer.name in ("c1", "c2", "bn")] == [1, 2, 3]


def test_an_activation_is_not_fused_when_the_producer_output_is_returned(tmp_path, gpu_device):
    rng = np.random.default_rng(1)
    shape = (1, 4, 5, 5)
    layers = with_shapes([conv("c1", rng), ("r1", "ReLU", {}, None, None)], shape)
    plan = check(chain_ir(tmp_path, shape, layers), gpu_device, rand(rng, *shape), extra=["c1"])
    assert not any(st.fused for st in plan.steps)
    # the ReLU cannot write into c1's buffer either: c1 is returned
    g = plan._groups
    assert g.find(plan.steps[1].out_slots[0]) != g.find(plan.steps[0].out_slots[0])


def test_in_place_layers_and_views_share_buffers_and_memory_is_reused(tmp_path, gpu_device):
    rng = np.random.default_rng(2)
    shape = (2, 4, 6, 7)
    layers = [conv("c1", rng), ("pool", "Pooling", {"kernel": "3,3", "strides": "1,1", "pads_begin": "1,1",
                                                    "pads_end": "1,1", "pool-method": "max"}, None, None),
              ("p1", "Power", {"power": 2, "scale": 0.5, "shift": 1}, None, None),
              ("s1", "SoftMax", {"axis": 1}, None, None), conv("c2", rng), conv("c3", rng), conv("c4", rng)]
    layers = with_shapes(layers, shape) + [("flat", "Flatten", {"axis": 1}, None, (2, 4 * 6 * 7)),
                                           ("fc", "FullyConnected", {"out-size": 3},
                                            {"weights": rand(rng, 3, 4 * 6 * 7)}, (2, 3))]
    plan = check(chain_ir(tmp_path, shape, layers), gpu_device, rand(rng, *shape), style="simt")  # no im2col scratch
    g = plan._groups
    names = {st.layer.name: st for st in plan.steps}
    # Power and SoftMax write into the pooling output (nobody reads it afterwards)
    assert g.find(names["p1"].out_slots[0]) == g.find(names["pool"].out_slots[0]) == \
        g.find(names["s1"].out_slots[0])
    assert g.find(names["flat"].out_slots[0]) == g.find(names["c4"].out_slots[0])
    tensor = 2 * 4 * 6 * 7 * 4
    assert plan.arena_bytes < 4 * tensor      # 9 tensors of that size live in at most 3 buffers at a time
    # whole buffers (no sub-buffers of an arena), never shared by blocks alive at the same step
    import pyopencl as cl
    request = plan.create_request()
    assert len(request.memory) == len(plan.buffer_sizes) <= 3
    assert all(b.get_info(cl.mem_info.ASSOCIATED_MEMOBJECT) is None for b in request.memory)
    blocks = list(plan._blocks.values())
    for i, a in enumerate(blocks):
        for b in blocks[i + 1:]:
            assert a.buffer != b.buffer or a.end < b.start or b.end < a.start


def test_a_network_input_is_never_overwritten_in_place(tmp_path, gpu_device):
    rng = np.random.default_rng(3)
    shape = (1, 3, 4, 5)
    network = chain_ir(tmp_path, shape, with_shapes([("r", "ReLU", {}, None, None)], shape))
    plan = check(network, gpu_device, rand(rng, *shape))
    assert plan._groups.find(plan.steps[0].out_slots[0]) != plan._groups.find(plan._input_slots["data"])


def test_branches_concat_and_split(tmp_path, gpu_device):
    """Two branches of the same input (the input read twice, a buffer freed only
    after its last reader), re-joined by Concat, then split again."""
    from tests.gpu.gpu_helpers import branch_ir
    rng = np.random.default_rng(4)
    s = (2, 3, 5, 4)
    network = branch_ir(tmp_path, s, ("Power", {"power": "2"}),
                        ("split", "Split", {"axis": "1"}, 3, [(2, 2, 5, 4), (2, 4, 5, 4)]))
    cpu, gpu = both_plans(network, gpu_device)
    x = rand(rng, *s)
    ref, ours = cpu.infer({"data": x}), gpu.infer({"data": x})
    assert sorted(ours) == ["split.1", "split.2"]
    for key in ref:
        assert np.array_equal(ours[key], ref[key])


def test_requests_run_concurrently_and_outputs_are_new_arrays(tmp_path, gpu_device):
    from device_daemons.gpu import GpuPlan
    from tests.support import run_in_threads
    rng = np.random.default_rng(5)
    shape = (1, 4, 9, 9)
    plan = GpuPlan(chain_ir(tmp_path, shape, with_shapes([conv("c1", rng), conv("c2", rng)], shape)), gpu_device)
    xs = [rand(rng, *shape) for _ in range(4)]
    single = [plan.infer({"data": x})["c2"] for x in xs]
    assert single[0] is not plan.infer({"data": xs[0]})["c2"]
    results = {}
    run_in_threads(lambda t: results.__setitem__(t, [plan.infer({"data": xs[(t + i) % 4]})["c2"]
                                                     for i in range(4)]), 3)
    for t, outs in results.items():
        for i, out in enumerate(outs):
            assert np.array_equal(out, single[(t + i) % 4])
    assert 1 <= len(plan._idle) <= 3
    queues = {id(r.queue) for r in plan._idle}
    assert len(queues) == len(plan._idle)


def test_reshape_changes_the_batch_and_drops_old_requests(tmp_path, gpu_device):
    from device_daemons.gpu import GpuPlan
    rng = np.random.default_rng(6)
    shape = (1, 4, 6, 6)
    network = chain_ir(tmp_path, shape, with_shapes([conv("c1", rng), ("r", "ReLU", {}, None, None)], shape))
    plan = GpuPlan(network, gpu_device)
    plan.infer({"data": rand(rng, *shape)})
    assert len(plan._idle) == 1
    plan.reshape({"data": (3, 4, 6, 6)})
    assert plan._idle == [] and plan.output_shapes() == {"r": (3, 4, 6, 6)}
    cpu, _ = both_plans(network, gpu_device)
    cpu.reshape({"data": (3, 4, 6, 6)})
    x = rand(rng, 3, 4, 6, 6)
    assert rel_err(plan.infer({"data": x})["r"], cpu.infer({"data": x})["r"]) <= 1e-5


def test_input_errors(tmp_path, gpu_device):
    from device_daemons.gpu import GpuPlan
    from ir import IRError
    shape = (1, 3, 4, 4)
    plan = GpuPlan(chain_ir(tmp_path, shape, with_shapes([("r", "ReLU", {}, None, None)], shape)), gpu_device)
    with pytest.raises(IRError, match="no input named 'x'"):
        plan.infer({"x": np.zeros(shape)})
    with pytest.raises(IRError, match=r"shape \[1, 3, 4, 5\] but the plan expects \[1, 3, 4, 4\]"):
        plan.infer({"data": np.zeros((1, 3, 4, 5))})
    with pytest.raises(IRError, match="dtype"):
        plan.infer({"data": np.zeros(shape, bool)})
    with pytest.raises(IRError, match="non-positive"):
        plan.reshape({"data": (0, 3, 4, 4)})
    assert plan.infer({"data": np.ones(shape, np.int64)})["r"].dtype == np.float32


def test_a_layer_the_gpu_lacks_names_hetero(tmp_path, gpu_device):
    from device_daemons.cpu.kernels import KernelError
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.query import query_network
    shape = (1, 3, 4, 4)
    network = chain_ir(tmp_path, shape, with_shapes([("r", "ReLU", {}, None, None),
                                                     ("m", "MVN", {"eps": 1e-9}, None, None)], shape))
    with pytest.raises(KernelError, match="'MVN' is not supported by the GPU plugin.*HETERO:GPU,CPU"):
        GpuPlan(network, gpu_device)
    assert query_network(network) == {"data": "GPU", "r": "GPU"}


def test_query_network_rejects_layers_whose_attributes_are_bad(tmp_path):
    from device_daemons.gpu.query import query_network
    shape = (1, 3, 4, 4)
    network = chain_ir(tmp_path, shape, with_shapes([("a", "Activation", {"type": "swish"}, None, None)], shape))
    assert query_network(network) == {"data": "GPU"}


def test_device_names(monkeypatch, gpu_device):
    from device_daemons.gpu import DeviceError, list_devices, open_device
    from device_daemons.gpu.device import ENV_DEVICE
    devices = list_devices()
    assert open_device("GPU") is gpu_device and open_device("GPU.0") is gpu_device
    assert gpu_device.describe()["name"] == devices[0][2].name.strip()
    with pytest.raises(DeviceError, match=f"asks for OpenCL device {len(devices)}, but there are {len(devices)}"):
        open_device(f"GPU.{len(devices)}")
    with pytest.raises(DeviceError, match="not GPU or GPU.N"):
        open_device("CPU")
    monkeypatch.setenv(ENV_DEVICE, gpu_device.platform.split()[0])
    assert open_device("GPU") is gpu_device
    monkeypatch.setenv(ENV_DEVICE, "0:0")
    assert open_device("GPU").cl_device.int_ptr == devices[[i for i, (p, d, _) in enumerate(devices)
                                                            if (p, d) == (0, 0)][0]][2].int_ptr
    monkeypatch.setenv(ENV_DEVICE, "no such device anywhere")
    with pytest.raises(DeviceError, match="names no OpenCL device; the devices are 0: "):
        open_device("GPU")


def test_program_builds_are_cached_and_errors_carry_the_log(gpu_device):
    from device_daemons.gpu.programs import BuildError, build, builtin_program
    assert builtin_program(gpu_device, "pooling.cl", False) is builtin_program(gpu_device, "pooling.cl", False)
    assert builtin_program(gpu_device, "pooling.cl", True) is not builtin_program(gpu_device, "pooling.cl", False)
    with pytest.raises(BuildError, match="(?s)does not compile.*Build log:\n.*undeclared"):
        build(gpu_device, "__kernel void k(__global float* x) { x[0] = nope; }", (), "test.cl")


def test_launches_go_through_the_c_loop_or_pyopencl_with_equal_results(tmp_path, gpu_device, monkeypatch):
    """The C loop (gcc is here) enqueues each run of device launches between host
    steps in one call; MO_CORE_GPU_ENQUEUE=python keeps pyopencl's enqueue. The
    same kernels: equal outputs. Counted runs (per-layer times) use pyopencl."""
    from device_daemons.gpu import GpuPlan
    rng = np.random.default_rng(12)
    shape = (2, 4, 7, 6)
    layers = with_shapes([conv("c1", rng), ("r1", "ReLU", {}, None, None), conv("c2", rng),
                          ("s", "SoftMax", {"axis": 1}, None, None)], shape)
    network = chain_ir(tmp_path, shape, layers)
    x = rand(rng, *shape)
    native = GpuPlan(network, gpu_device, style="simt")
    request = native.create_request()
    assert [len(steps) for _, steps in request.segments] == [len(request.actions)]
    monkeypatch.setenv("MO_CORE_GPU_ENQUEUE", "python")
    plain = GpuPlan(network, gpu_device, style="simt")
    assert plain.create_request().segments is None
    first = native.infer({"data": x})["s"]
    np.testing.assert_array_equal(first, plain.infer({"data": x})["s"])
    perf = []
    np.testing.assert_array_equal(first, native.infer({"data": x}, perf)["s"])
    assert [r.status for r in perf] == ["executed", "fused", "executed", "executed"]


def test_the_wait_for_the_device_does_not_hang_on_a_late_completion_callback(gpu_device, monkeypatch):
    """NVIDIA's driver runs a marker's completion callback ~20 ms after the marker
    completes (measured on an H100: every request took 20 ms). The wait polls the status
    as well: with a callback that never comes, a short run is still seen done at once."""
    import time

    import pyopencl as cl

    from device_daemons.gpu import request
    queue = cl.CommandQueue(gpu_device.context)
    buf = cl.Buffer(gpu_device.context, cl.mem_flags.READ_WRITE, 4 << 20)
    host = np.ones(1 << 20, np.float32)
    request.wait_device(queue, time.monotonic() + 30, "a warm-up copy")
    monkeypatch.setattr(cl.Event, "set_callback", lambda self, status, fn: None)  # a driver that never calls back
    times = []
    for _ in range(5):
        cl.enqueue_copy(queue, buf, host, is_blocking=False)
        start = time.monotonic()
        request.wait_device(queue, time.monotonic() + 30, "a copy")
        times.append(time.monotonic() - start)
    assert sorted(times)[2] < 0.1, times  # (polled: well under the 0.5 s a callback-only wait slept)
