"""The oneDNN backend of the CPU plugin (device_daemons/cpu/onednn/): the per-layer
choice with numpy fallbacks, fused activations, in-place element-wise layers,
layouts and reorders, weights shared between plans, loading the library, the
arena. Every case is checked against real pycaffe (tiny nets, random weights)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from device_daemons.cpu import ExecutionPlan
from tests.cpu.cpu_helpers import assert_backend, assert_close, caffe_case
from tests.support import REPO


def conv(name, bottom, top, out, extra="kernel_size: 3 pad: 1"):
    return (f'layer {{ name: "{name}" type: "Convolution" bottom: "{bottom}" top: "{top}" '
            f'convolution_param {{ num_output: {out} {extra} }} }}\n')


def layer(kind, name, bottoms, top, params=""):
    b = " ".join(f'bottom: "{x}"' for x in ([bottoms] if isinstance(bottoms, str) else bottoms))
    return f'layer {{ name: "{name}" type: "{kind}" {b} top: "{top}" {params} }}\n'


def perf_rows(plan, inputs):
    perf = []
    plan.infer(inputs, perf)
    return {row.name: row for row in perf}


# conv -> relu -> PReLU (numpy only) -> conv -> pool -> concat(pool, Normalize across_spatial (numpy) of it)
# -> LRN -> fc
MIXED = (conv("c1", "data", "c1", 16) + layer("ReLU", "r1", "c1", "c1")
         + layer("PReLU", "p1", "c1", "p1")
         + conv("c2", "p1", "c2", 16) + layer("ReLU", "r2", "c2", "c2")
         + layer("Pooling", "pool", "c2", "pool", "pooling_param { pool: MAX kernel_size: 3 stride: 2 }")
         + layer("Normalize", "l2", "pool", "l2", "norm_param { across_spatial: true channel_shared: false }")
         + layer("Concat", "cat", ["pool", "l2"], "cat")
         + layer("LRN", "lrn", "cat", "lrn", "lrn_param { local_size: 5 alpha: 0.001 beta: 0.75 }")
         + layer("InnerProduct", "fc", "lrn", "fc", "inner_product_param { num_output: 10 }")
         + layer("Softmax", "prob", "fc", "prob"))


def test_each_layer_runs_on_its_backend_and_the_net_matches_pycaffe(tmp_path):
    c = caffe_case(tmp_path, MIXED, {"data": (2, 3, 17, 15)}, scale=0.3, extra_outputs=["cat", "fc"])
    ours, ref = c.run()
    for key in ("cat", "fc", "prob"):
        assert_close(ours[key], ref[key], 1e-4, key)
    numpy_plan = ExecutionPlan(c.network, extra_outputs=["cat", "fc"], backend="numpy")
    for key, value in numpy_plan.infer(c.inputs).items():
        assert_close(ours[key], value, 1e-4, "numpy backend " + key)

    plan = ExecutionPlan(c.network, extra_outputs=["cat", "fc"], backend="onednn")
    assert_backend(plan, "onednn", ("Convolution", "ReLU", "Pooling", "Concat", "Norm", "FullyConnected", "SoftMax"))
    rows = perf_rows(plan, c.inputs)
    assert {n: rows[n].backend for n in ("p1", "l2")} == {"p1": "numpy", "l2": "numpy"}
    assert {n: rows[n].backend for n in ("c1", "c2", "pool", "cat", "lrn", "fc", "prob")} == {
        n: "onednn" for n in ("c1", "c2", "pool", "cat", "lrn", "fc", "prob")}
    assert rows["r1"].status == rows["r2"].status == "fused"
    # reorders where numpy and oneDNN meet: into numpy for PReLU, Normalize and the blocked concat output, back
    # for c2; none for the network input: c1 takes its plain layout, so it reads the caller's array where it
    # is; none for Normalize's output either: the concat reads it plain, where numpy left it (a Bind step, no
    # -pc row); none for fc and prob: they write plain layout, straight into the output array
    reorders = sorted(n for n, r in rows.items() if r.type == "Reorder")
    # (named after the slot: layer.port; c1 writes r1's slot, the ReLU being fused into it)
    assert reorders == ["cat.2/to_output", "p1.2/to_onednn", "pool.1/to_numpy", "r1.1/to_numpy"], reorders
    assert [s.name for s in plan.program.steps if s.type == "Bind"] == ["l2.2/bind"]
    assert not any(r.type == "Bind" for r in rows.values())
    assert all(memory.buffer is None for memory in plan.program.late_bound)  # not kept past the run
    assert [slot for slot, _ in plan.program.bound] == [plan._input_slots["data"]]
    assert sorted(o.name for o in plan.program.bound_outputs) == ["fc", "prob"]
    # written where run(out=...) says (the daemon's shared-memory slot), else into new arrays each run
    dests = {name: np.full(value.shape, np.nan, np.float32) for name, value in ours.items()}
    got = plan.infer(c.inputs, out=dests)
    for key in ("cat", "fc", "prob"):
        assert got[key] is dests[key]
        assert_close(dests[key], ref[key], 1e-4, key)
    again = plan.infer(c.inputs)
    assert again["prob"] is not got["prob"] and again["fc"] is not got["fc"]
    assert_close(again["prob"], ref["prob"], 1e-4, "prob")


def test_activation_fused_only_when_nobody_else_reads_the_convolution(tmp_path):
    layers = (conv("c1", "data", "c1", 8) + layer("ReLU", "r1", "c1", "r1")
              + layer("Sigmoid", "s1", "r1", "s1") + conv("c2", "s1", "c2", 4))
    c = caffe_case(tmp_path, layers, {"data": (1, 5, 9, 9)}, scale=0.5)
    rows = perf_rows(c.plan, c.inputs)
    assert rows["r1"].status == rows["s1"].status == "fused" and rows["r1"].backend == "fused into c1"
    ours, ref = c.run()
    assert_close(ours["c2"], ref["c2"], 1e-4, "c2")
    # the pre-activation output is also read (as a network output): nothing is fused
    (tmp_path / "x").mkdir()
    c = caffe_case(tmp_path / "x", layers, {"data": (1, 5, 9, 9)}, scale=0.5, extra_outputs=["c1", "r1"])
    rows = perf_rows(c.plan, c.inputs)
    assert rows["r1"].status == rows["s1"].status == "executed"
    ours, ref = c.run()
    for key in ("c1", "r1", "c2"):
        assert_close(ours[key], ref[key], 1e-4, key)


def test_in_place_activation_never_overwrites_a_tensor_read_later(tmp_path):
    """pool -> ReLU and pool -> conv: the ReLU (standalone, not after a convolution)
    may run in place only when its input has no other reader; here it has one.
    Element-wise layers whose first input has no other reader do run in place."""
    layers = (conv("c0", "data", "c0", 8)
              + layer("Pooling", "pool", "c0", "pool", "pooling_param { pool: AVE kernel_size: 2 stride: 2 }")
              + layer("ReLU", "r", "pool", "r") + conv("c1", "pool", "c1", 8)
              + layer("Eltwise", "sum", ["r", "c1"], "sum", "eltwise_param { operation: SUM coeff: 0.5 coeff: 2 }")
              + layer("ReLU", "r2", "sum", "r2") + layer("Eltwise", "mx", ["r2", "c1"], "mx",
                                                          "eltwise_param { operation: MAX }")
              + layer("Pooling", "p2", "mx", "p2", "pooling_param { pool: MAX kernel_size: 2 stride: 1 }")
              + layer("TanH", "t2", "p2", "t2") + conv("c2", "t2", "c2", 4))
    c = caffe_case(tmp_path, layers, {"data": (2, 8, 10, 10)}, scale=0.5, extra_outputs=["sum"])
    assert_backend(c.plan, "onednn", ("Convolution", "Pooling", "ReLU", "Eltwise", "Activation"))
    # in place: sum over r, mx over r2, t2 over p2 (each its input's only reader); never r over pool
    assert c.plan.program.inplace == ["sum", "mx", "t2"]
    ours, ref = c.run()
    for key in ("sum", "c2"):
        assert_close(ours[key], ref[key], 1e-4, key)


def test_average_pooling_that_ceil_pads_past_the_declared_padding_stays_on_numpy(tmp_path):
    params = "pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }"
    layers = conv("c", "data", "c", 4) + layer("Pooling", "p", "c", "p", params) + conv("c2", "p", "c2", 4)
    c = caffe_case(tmp_path, layers, {"data": (1, 3, 10, 7)})
    assert "p" in c.plan.program.fallbacks and "ceil" in c.plan.program.fallbacks["p"]
    rows = perf_rows(c.plan, c.inputs)
    assert (rows["c"].backend, rows["p"].backend, rows["c2"].backend) == ("onednn", "numpy", "onednn")
    ours, ref = c.run()
    assert_close(ours["c2"], ref["c2"], 1e-4, "c2")


@pytest.mark.parametrize("region", ["ACROSS_CHANNELS", "WITHIN_CHANNEL"])
def test_lrn_regions_match_pycaffe(tmp_path, region):
    layers = conv("c", "data", "c", 16) + layer(
        "LRN", "n", "c", "n", f"lrn_param {{ local_size: 3 alpha: 0.3 beta: 0.75 k: 2 norm_region: {region} }}")
    c = caffe_case(tmp_path, layers, {"data": (2, 4, 7, 9)})
    assert_backend(c.plan, "onednn", ("Norm",))
    ours, ref = c.run()
    assert_close(ours["n"], ref["n"], 1e-4, region)


@pytest.mark.parametrize("precision", ["f32", "bf16"])
@pytest.mark.parametrize("params,channels", [("channel_shared: false", 13), ("channel_shared: true eps: 0.01", 16),
                                             ("channel_shared: false", 24)])
def test_normalize_across_channels_runs_native_between_the_convolutions(tmp_path, params, channels, precision):
    """Normalize (across the channels) by our C kernel on the convolution's tensor channels last
    (onednn/normalization.py): no export to numpy and back, pycaffe's result (channel counts
    that are and are not a multiple of the kernel's 8 partial sums); across_spatial stays numpy."""
    layers = (conv("c1", "data", "c1", channels)
              + layer("Normalize", "n", "c1", "n", f"norm_param {{ across_spatial: false {params} }}")
              + conv("c2", "n", "c2", 8))
    c = caffe_case(tmp_path, layers, {"data": (2, 3, 9, 7)}, scale=0.5, extra_outputs=["n"])
    _, ref = c.run()
    plan = ExecutionPlan(c.network, extra_outputs=["n"], backend="onednn", precision=precision)
    rows = perf_rows(plan, c.inputs)
    assert rows["n"].backend == "native" and rows["n"].precision == "f32"
    assert not [r for r in rows.values() if r.type == "Reorder" and "numpy" in r.note], rows
    out = plan.infer(c.inputs)
    tol = 1e-4 if precision == "f32" else 2e-2
    for key in ("n", "c2"):
        assert_close(out[key], ref[key], tol, f"{key} ({precision})")
    (tmp_path / "s").mkdir()
    across = caffe_case(tmp_path / "s", layers.replace("across_spatial: false", "across_spatial: true"),
                        {"data": (1, 3, 9, 7)}, scale=0.5)
    assert perf_rows(across.plan, across.inputs)["n"].backend == "numpy"


def test_batch_reshape_makes_new_primitives(tmp_path):
    c = caffe_case(tmp_path, MIXED, {"data": (1, 3, 17, 15)}, scale=0.3)
    program = c.plan.program
    c.plan.reshape({"data": (3, 3, 17, 15)})
    assert c.plan.program is not program
    assert_backend(c.plan, "onednn", ("Convolution", "Pooling", "FullyConnected"))
    x = np.random.default_rng(4).standard_normal((3, 3, 17, 15)).astype(np.float32)
    c.net.blobs["data"].reshape(3, 3, 17, 15)
    c.net.reshape()
    ours, ref = c.run({"data": x})
    assert_close(ours["prob"], ref["prob"], 1e-4, "batch 3")


def test_plans_of_one_network_share_weights_and_run_in_parallel(tmp_path):
    from device_daemons.cpu.onednn import op
    c = caffe_case(tmp_path, MIXED, {"data": (1, 3, 17, 15)}, scale=0.3)
    plans = [ExecutionPlan(c.network, backend="onednn") for _ in range(3)]
    constants = op._CONSTANTS[id(c.network)]  # weights and biases of c1, c2 and fc: one layout each, made once
    assert len(constants) == 6 and all(len(layouts) == 1 for layouts in constants.values())
    xs = [np.random.default_rng(i).standard_normal((1, 3, 17, 15)).astype(np.float32) for i in range(6)]
    want = [c.run({"data": x})[1]["prob"] for x in xs]
    errors = []

    def work(plan):
        try:
            for _ in range(5):
                for x, ref in zip(xs, want):
                    # as the daemon's plan pool says when requests run side by side
                    assert_close(plan.infer({"data": x}, concurrent=len(plans))["prob"], ref, 1e-4, "threaded")
        except AssertionError as err:
            errors.append(err)
    threads = [threading.Thread(target=work, args=(p,)) for p in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    threads = max(1, os.cpu_count() // len(plans))
    for plan in plans:  # a program made once for that many OpenMP threads, the default one kept
        assert list(plan._shared_programs) == [threads] and plan._shared_programs[threads].threads == threads
        assert plan.program.threads is None
    assert all(len(layouts) == 1 for layouts in constants.values())


def _run_python(code, **env):
    """`code` in a fresh interpreter; env values of None remove that variable."""
    full = dict(os.environ, PYTHONPATH=REPO, **env)
    full = {k: v for k, v in full.items() if v is not None}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full,
                          cwd=REPO, timeout=120)


PLAN_OF_TINY_IR = """
    import numpy as np
    from ir import Edge, Layer, Network, Port
    from device_daemons.cpu import ExecutionPlan
    shape = (1, 8, 6, 6)
    net = Network("t", [Layer(0, "data", "Input", outputs=[Port(0, shape)]),
                        Layer(1, "relu", "ReLU", inputs=[Port(0, shape)], outputs=[Port(1, shape)])],
                  [Edge(0, 0, 1, 0)])
    plan = ExecutionPlan(net)
    x = np.linspace(-1, 1, 288, dtype=np.float32).reshape(shape)
    assert np.array_equal(plan.infer({"data": x})["relu"], np.maximum(x, 0))
    print(plan.program.backend, plan.warnings)
"""


def test_backend_choice_and_a_missing_library():
    proc = _run_python(PLAN_OF_TINY_IR, MO_CORE_CPU_BACKEND="onednn")
    assert proc.returncode == 0 and proc.stdout.startswith("onednn []"), proc.stderr
    proc = _run_python(PLAN_OF_TINY_IR, MO_CORE_CPU_BACKEND="fast")
    assert "MO_CORE_CPU_BACKEND='fast' is not a CPU backend; use one of auto, onednn, numpy" in proc.stderr
    missing = {"MO_CORE_DNNL_LIB": "/nonexistent/libdnnl.so.3"}
    proc = _run_python(PLAN_OF_TINY_IR, MO_CORE_CPU_BACKEND="onednn", **missing)
    assert proc.returncode != 0
    assert "the oneDNN CPU backend cannot run here: MO_CORE_DNNL_LIB=/nonexistent/libdnnl.so.3 does not exist" \
        in proc.stderr and "MO_CORE_CPU_BACKEND=numpy" in proc.stderr
    proc = _run_python(PLAN_OF_TINY_IR, MO_CORE_CPU_BACKEND="auto", **missing)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("numpy ['oneDNN is not available (MO_CORE_DNNL_LIB="), proc.stdout


def test_openmp_threads_spin_briefly_at_barriers_unless_told_otherwise():
    from device_daemons.native_build import SPIN_COUNT
    env = {"MO_CORE_CPU_BACKEND": "onednn", "OMP_DISPLAY_ENV": "VERBOSE"}
    proc = _run_python(PLAN_OF_TINY_IR, OMP_WAIT_POLICY=None, GOMP_SPINCOUNT=None, **env)
    assert proc.returncode == 0 and "GOMP_SPINCOUNT = '{}'".format(SPIN_COUNT) in proc.stderr, proc.stderr
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in proc.stderr, proc.stderr  # (libgomp's spin once threads outnumber CPUs)
    proc = _run_python(PLAN_OF_TINY_IR, OMP_WAIT_POLICY="passive", GOMP_SPINCOUNT=None, **env)
    assert proc.returncode == 0 and "GOMP_SPINCOUNT = '0'" in proc.stderr, proc.stderr
    proc = _run_python(PLAN_OF_TINY_IR, OMP_WAIT_POLICY="active", **env)
    assert proc.returncode == 0 and "OMP_WAIT_POLICY = 'ACTIVE'" in proc.stderr, proc.stderr


THREAD_MASKS = PLAN_OF_TINY_IR + """
    import json, os
    from device_daemons.cpu.native import team_pinning
    masks = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/status") as f:
            masks[int(tid)] = [line.split()[1] for line in f if line.startswith("Cpus_allowed_list")][0]
    print(json.dumps([team_pinning.team_size(), masks.pop(os.getpid()), sorted(set(masks.values()))]))
"""


def test_a_whole_team_request_runs_a_thread_per_cpu_and_frees_the_caller():
    """A program of every CPU's team pins its threads for the request (native/team_pinning.py):
    after it the team's other threads keep a CPU each and the calling thread has the whole
    mask back; MO_CORE_PIN_THREADS=0 leaves every thread the whole mask."""
    def run(**env):
        proc = _run_python(THREAD_MASKS, MO_CORE_CPU_BACKEND="onednn", **env)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.splitlines()[-1])  # team size, the calling thread's mask, the others'
    size, main, others = run()
    if len(os.sched_getaffinity(0)) == 1:  # (nothing to pin on one CPU)
        assert size == 0
        return
    off_size, whole, off_others = run(MO_CORE_PIN_THREADS="0")
    assert size == len(os.sched_getaffinity(0)) and main == whole
    assert any(mask.isdigit() for mask in others), f"no thread of the team is on one CPU: {others}"
    assert off_size == 0 and not any(mask.isdigit() for mask in off_others), off_others


def test_declarations_are_generated_once_then_read_from_the_cache(tmp_path):
    home = str(tmp_path / "home")
    proc = _run_python(PLAN_OF_TINY_IR, MO_CORE_HOME=home, MO_CORE_CPU_BACKEND="onednn")
    assert proc.returncode == 0, proc.stderr
    (digest,) = os.listdir(os.path.join(home, "onednn"))
    cache = os.path.join(home, "onednn", digest)
    assert sorted(os.listdir(cache)) == ["dnnl_args.txt", "dnnl_cdef.h"]
    with open(os.path.join(cache, "dnnl_args.txt")) as f:
        args = dict(line.split() for line in f)
    assert (args["DNNL_ARG_SRC"], args["DNNL_ARG_DST"], args["DNNL_ARG_WEIGHTS"]) == ("1", "17", "33")
    # no compiler on the PATH now: the cached declarations are enough
    proc = _run_python(PLAN_OF_TINY_IR, MO_CORE_HOME=home, MO_CORE_CPU_BACKEND="onednn", PATH="/nonexistent",
                       CC="/nonexistent/gcc")
    assert proc.returncode == 0 and proc.stdout.startswith("onednn"), proc.stderr
    proc = _run_python(PLAN_OF_TINY_IR, MO_CORE_HOME=str(tmp_path / "other"), MO_CORE_CPU_BACKEND="onednn",
                       PATH="/nonexistent", CC="/nonexistent/gcc")
    assert "a C preprocessor (gcc) is needed once to read oneDNN's headers" in proc.stderr


def test_arena_never_overlaps_tensors_alive_at_the_same_step():
    from device_daemons.cpu.onednn.arena import ALIGN, place

    class T:
        def __init__(self, size, first, last):
            self.size, self.first, self.last, self.offset = size, first, last, None
    rng = np.random.default_rng(0)
    tensors = []
    for _ in range(300):
        first = int(rng.integers(0, 100))
        tensors.append(T(int(rng.integers(1, 5000)) * 4, first, first + int(rng.integers(0, 10))))
    total = place(tensors)
    for t in tensors:
        assert t.offset % ALIGN == 0 and t.offset + t.size <= total
    for i, a in enumerate(tensors):
        for b in tensors[i + 1:]:
            if a.first <= b.last and b.first <= a.last:
                assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset
    peak = max(sum(t.size for t in tensors if t.first <= step <= t.last) for step in range(110))
    assert peak <= total < sum(t.size for t in tensors) / 3


def _mapping_rss_kb(address: int) -> int:
    """Resident kB of the mapping of this process that contains `address` (/proc/self/smaps)."""
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= address < hi
            elif inside and line.startswith("Rss:"):
                return int(line.split()[1])
    raise AssertionError("no mapping holds that address")


def test_weights_copied_into_onednn_leave_the_resident_memory(tmp_path):
    """The IR's .bin is memory-mapped; once a primitive has its weights in its own
    layout, the mapped pages are dropped from the process (read again from the file
    if a numpy kernel needs them)."""
    import mmap
    from device_daemons.cpu.onednn.op import _release_mapped
    path = tmp_path / "w.bin"
    values = np.random.default_rng(0).standard_normal(300_000).astype(np.float32)
    values.tofile(path)
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    weights = np.frombuffer(mapped, np.float32)[1000:].reshape(-1, 100)  # a view, as the IR reader's blobs
    assert float(weights.sum()) != 0.0  # touch every page
    address = weights.ctypes.data
    assert _mapping_rss_kb(address) >= 1100
    _release_mapped(weights)
    assert _mapping_rss_kb(address) <= 8  # at most the two partial pages at the ends
    np.testing.assert_array_equal(weights.ravel(), values[1000:])  # read back from the file


# residual blocks: a projection shortcut (both branches convolutions) and an identity
# shortcut (the block's input, read by the branch's first convolution too)
RESIDUAL = (conv("c0", "data", "c0", 16) + layer("ReLU", "r0", "c0", "c0")
            + conv("a1", "c0", "a1", 16) + layer("ReLU", "ra1", "a1", "a1") + conv("a2", "a1", "a2", 16)
            + layer("Eltwise", "sum1", ["c0", "a2"], "sum1") + layer("ReLU", "rs1", "sum1", "sum1")
            + conv("b1", "sum1", "b1", 8, "kernel_size: 1") + conv("p", "sum1", "p", 8, "kernel_size: 1")
            + layer("Eltwise", "sum2", ["p", "b1"], "sum2", "eltwise_param { operation: SUM coeff: 1 coeff: 1 }")
            + layer("Eltwise", "sum3", ["sum2", "p"], "sum3", "eltwise_param { operation: SUM coeff: 0.5 coeff: 1 }")
            + conv("out", "sum3", "out", 4))


def test_residual_sums_are_fused_into_the_convolution_when_safe(tmp_path):
    c = caffe_case(tmp_path, RESIDUAL, {"data": (2, 8, 9, 7)}, scale=0.3)
    assert_backend(c.plan, "onednn", ("Convolution", "ReLU", "Eltwise"))
    rows = perf_rows(c.plan, c.inputs)
    # sum1: a2 adds into c0 (c0's other reader a1 ran before); its ReLU follows as a post-op
    assert (rows["sum1"].backend, rows["rs1"].backend) == ("fused into a2", "fused into a2")
    # sum2: p does not exist yet when b1 runs, and p has a second reader (sum3): a sum
    # primitive of its own
    assert rows["sum2"].status == "executed" and rows["sum2"].backend == "onednn"
    ours, ref = c.run()
    assert_close(ours["out"], ref["out"], 1e-4, "out")
    numpy_out = ExecutionPlan(c.network, backend="numpy").infer(c.inputs)["out"]
    assert_close(ours["out"], numpy_out, 1e-4, "numpy backend")



@pytest.mark.parametrize("tail", ["output", "conv"])
@pytest.mark.parametrize("chain", [[("Sigmoid", ""), ("ReLU", "")],
                                   [("Scale", "scale_param { bias_term: true }"), ("ReLU", "")]])  # (BN's form)
def test_a_residual_sum_followed_by_a_chain_of_activations(tmp_path, chain, tail):
    """A pre-activation block (Add -> BN -> ReLU, ResNet50V2's): the sum goes into the convolution
    as a post-op; an activation that had the next one fused into it was taken alone, the next
    one never ran: NaN outputs, or a crash when a layer read it."""
    text = conv("a", "data", "a", 8, "kernel_size: 1") + conv("b", "data", "b", 8)
    text += layer("Eltwise", "sum", ["a", "b"], "x0")
    last = f"act{len(chain) - 1}"  # (its top named as the layer: the IR names outputs by layer)
    for k, (kind, params) in enumerate(chain):
        text += layer(kind, f"act{k}", f"x{k}", last if k == len(chain) - 1 else f"x{k + 1}", params)
    if tail == "conv":
        text += conv("out", last, "out", 4, "kernel_size: 1")
    c = caffe_case(tmp_path, text, {"data": (1, 4, 8, 8)}, scale=0.3)
    ours, ref = c.run()
    name = "out" if tail == "conv" else last
    assert_close(ours[name], ref[name], 1e-4, name)


@pytest.mark.parametrize("precision", ["f32", "bf16"])
@pytest.mark.parametrize("params,shape", [("kernel_size: 4 stride: 2 pad: 1 group: 2", (1, 4, 5, 6)),
                                          ("kernel_size: 3 stride: 2 pad: 1", (1, 3, 3, 4, 5))], ids=["2d", "3d"])
def test_deconvolution_on_onednn_with_its_activation(tmp_path, params, shape, precision):
    """oneDNN's deconvolution (Caffe's weights with the channel axes swapped per group), the ReLU after it a
    post-op; equal to pycaffe (2-D and its N-D form), bf16 within 2e-2."""
    text = (f'layer {{ name: "up" type: "Deconvolution" bottom: "data" top: "up" convolution_param {{ num_output: 6 '
            f'{params} }} }}\n' + layer("ReLU", "relu", "up", "up"))
    c = caffe_case(tmp_path, text, {"data": shape}, scale=0.4)
    _, ref = c.run()
    plan = ExecutionPlan(c.network, backend="onednn", precision=precision)
    rows = perf_rows(plan, c.inputs)
    assert rows["up"].backend == "onednn" and not rows["up"].kernel.startswith("ref"), rows["up"].kernel
    assert rows["relu"].status == "fused"
    assert_close(plan.infer(c.inputs)["relu"], ref["up"], 1e-4 if precision == "f32" else 2e-2, precision)


def test_gelu_is_a_post_op_of_the_convolution_and_erf_runs_on_numpy(tmp_path):
    """oneDNN's gelu_erf / gelu_tanh post-ops; a lone Erf has no oneDNN form (the numpy kernel, checked
    against Python's erf in test_cpu_plan.py, is the reference of both)."""
    from tests.cpu.test_cpu_mobile import Net, ran_in, run_both
    net = Net((1, 8, 9, 11))
    erf = net.add("Activation", ["data"], {"type": "erf"})
    exact = net.add("Activation", [net.conv(erf, 16)], {"type": "gelu"})
    tanh = net.add("Activation", [net.conv(exact, 16)], {"type": "gelu", "approximation_mode": "tanh"})
    net.conv(tanh, 8)
    plan = run_both(tmp_path, net)
    assert ran_in(plan, exact) != exact and ran_in(plan, tanh) != tanh  # inside the convolutions
    assert [s.backend for s in plan.program.steps if s.name == erf] == ["numpy"]


@pytest.mark.parametrize("precision", ["f32", "bf16"])
@pytest.mark.parametrize("a,b,data,backend", [((2, 4, 6, 5), (2, 4, 5, 7), {}, "onednn"),
                                              ((1, 4, 6, 5), (3, 1, 5, 7), {}, "onednn"),  # leading axes broadcast
                                              ((2, 6, 5), (2, 7, 5), {"transpose_b": "true"}, "numpy")])
def test_matmul_on_onednn_where_it_can(tmp_path, a, b, data, backend, precision):
    from tests.cpu.cpu_helpers import single_layer_ir
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(a).astype(np.float32), rng.standard_normal(b).astype(np.float32)
    ref = np.matmul(x, np.swapaxes(y, -1, -2) if data else y)
    net = single_layer_ir(tmp_path, "MatMul", data, [a, b], [ref.shape])
    plan = ExecutionPlan(net, backend="onednn", precision=precision)
    assert [s.backend for s in plan.program.steps if s.type == "MatMul"] == [backend]
    assert_close(plan.infer({"in0": x, "in1": y})["layer"], ref, 1e-5 if precision == "f32" else 2e-2, "matmul")


@pytest.mark.parametrize("precision", ["f32", "bf16"])
@pytest.mark.parametrize("shape,axis,blobs,backend", [((2, 7, 16), 2, ("weights", "biases"), "onednn"),
                                                      ((3, 24), 1, ("biases",), "onednn"),
                                                      ((2, 8, 3, 5), 1, ("weights", "biases"), "onednn"),
                                                      ((2, 3, 9, 4), 2, ("weights",), "onednn"),
                                                      ((3, 10, 6), 1, (), "onednn")])
def test_layer_norm_on_onednn_over_any_axis(tmp_path, shape, axis, blobs, backend, precision):
    """Over the last axis, or over another one (ConvNeXt's channels) read with that axis innermost."""
    from tests.cpu.cpu_helpers import single_layer_ir
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    values = {name: rng.uniform(0.5, 1.5, shape[axis]).astype(np.float32) for name in blobs}
    net = single_layer_ir(tmp_path, "LayerNorm", {"axis": axis, "eps": 1e-3}, [shape], [shape], blobs=values)
    ref = ExecutionPlan(net, backend="numpy").infer({"in0": x})["layer"]  # (checked against numpy's own)
    plan = ExecutionPlan(net, backend="onednn", precision=precision)
    assert [s.backend for s in plan.program.steps if s.type == "LayerNorm"] == [backend]
    assert_close(plan.infer({"in0": x})["layer"], ref, 1e-5 if precision == "f32" else 2e-2, "layer norm")


# SSD heads as their exports have them: a convolution (blocked output) read through Permutes and
# Reshapes that split its channel blocks; a Permute that is a network output; one of a numpy array
TRANSPOSES = (conv("c1", "data", "c1", 24) + layer("ReLU", "r1", "c1", "c1")
              + layer("Permute", "nhwc", "c1", "nhwc", "permute_param { order: 0 order: 2 order: 3 order: 1 }")
              + layer("Flatten", "flat", "nhwc", "flat")
              + layer("Reshape", "split_blocks", "c1", "split_blocks",
                      "reshape_param { shape { dim: 0 dim: 6 dim: 4 dim: -1 } }")
              + layer("Permute", "back", "split_blocks", "back",
                      "permute_param { order: 0 order: 3 order: 1 order: 2 }")
              + conv("c2", "c1", "c2", 5, "kernel_size: 1")
              + layer("Permute", "swap", "c2", "swap", "permute_param { order: 1 order: 0 order: 3 order: 2 }")
              + layer("PReLU", "p1", "c1", "p1")
              + layer("Permute", "of_numpy", "p1", "of_numpy", "permute_param { order: 0 order: 3 order: 1 order: 2 }"))


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_permutes_and_block_splitting_reshapes_stay_on_onednn(tmp_path, precision):
    c = caffe_case(tmp_path, TRANSPOSES, {"data": (2, 3, 7, 5)}, scale=0.4, extra_outputs=["flat", "back", "swap"])
    _, ref = c.run()
    plan = ExecutionPlan(c.network, extra_outputs=["flat", "back", "swap"], backend="onednn", precision=precision)
    rows = perf_rows(plan, c.inputs)
    # a Permute is one reorder from the convolution's layout; a Reshape that splits the channel
    # blocks of a blocked layout (nChw16c) reads the tensor plain (one reorder) and is a view of it;
    # of the channels-last layout AMX's kernels write (acdb) it is a strided view with no reorder
    assert {n: rows[n].backend for n in ("nhwc", "back", "swap", "split_blocks", "flat")} == dict.fromkeys(
        ("nhwc", "back", "swap", "split_blocks", "flat"), "onednn")
    assert rows["split_blocks"].status == rows["flat"].status == "not_run"
    reorders = {n: r.note for n, r in rows.items() if r.type == "Reorder"}
    split_reorder = any("Reshape split_blocks reads abcd" in note for note in reorders.values())
    assert split_reorder != ("amx" in rows["c1"].kernel), (rows["c1"].kernel, reorders)
    assert rows["of_numpy"].backend == "numpy" and "numpy array" in rows["of_numpy"].note
    out = plan.infer(c.inputs)
    tol = 1e-4 if precision == "f32" else 2e-2
    for key in ("flat", "back", "swap", "of_numpy"):
        assert_close(out[key], ref[key], tol, f"{key} ({precision})")


# Slice / Split parts and a Crop on oneDNN (slices.py): each a reorder of a part of its input, of a blocked
# convolution output (channel parts at no block boundary), of a FullyConnected's (equal thirds, an LSTM's gates)
SLICES = (conv("c1", "data", "c1", 24)
          + 'layer { name: "sl" type: "Slice" bottom: "c1" top: "s0" top: "s1" top: "s2" '
            'slice_param { axis: 1 slice_point: 5 slice_point: 16 } }\n'
          + layer("ReLU", "r0", "s0", "r0") + layer("Sigmoid", "g1", "s1", "g1") + layer("TanH", "t2", "s2", "t2")
          + layer("InnerProduct", "fc", "c1", "fc", "inner_product_param { num_output: 12 }")
          + 'layer { name: "fsl" type: "Slice" bottom: "fc" top: "f0" top: "f1" top: "f2" slice_param { axis: 1 } }\n'
          + layer("Sigmoid", "h0", "f0", "h0") + layer("Eltwise", "e", ["f1", "f2"], "e", "eltwise_param { operation: PROD }")
          + layer("Pooling", "pool", "c1", "pool", "pooling_param { pool: MAX kernel_size: 2 stride: 2 }")
          + layer("Crop", "cr", ["c1", "pool"], "cr", "crop_param { axis: 2 offset: 1 offset: 2 }")
          # along the batch axis each part is one block of the input: a view (no primitive)
          + 'layer { name: "bsl" type: "Slice" bottom: "fc" top: "b0" top: "b1" slice_param { axis: 0 } }\n'
          + layer("Sigmoid", "bg", "b0", "bg") + layer("Eltwise", "bs", ["b0", "b1"], "bs"))


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_slices_and_crops_on_onednn_equal_caffe(tmp_path, precision):
    outputs = ["r0", "g1", "t2", "h0", "e", "cr", "bg", "bs"]
    c = caffe_case(tmp_path, SLICES, {"data": (2, 3, 7, 6)}, scale=0.4, extra_outputs=outputs)
    _, ref = c.run()
    plan = ExecutionPlan(c.network, extra_outputs=outputs, backend="onednn", precision=precision)
    rows = perf_rows(plan, c.inputs)
    sliced = ("sl", "fsl", "cr", "bsl")
    assert {n: rows[n].backend for n in sliced} == dict.fromkeys(sliced, "onednn"), rows
    assert rows["sl"].kernel and rows["cr"].kernel and not rows["bsl"].kernel, rows  # a reorder each; a view
    out = plan.infer(c.inputs)
    tol = 1e-4 if precision == "f32" else 3e-2  # (bf16: the convolution's rounding; the slices copy exactly)
    for key in outputs:
        assert_close(out[key], ref[key], tol, f"{key} ({precision})")


LOAD_THEN_RUN_ELSEWHERE = """
    import os, tempfile, threading
    import numpy as np
    from device_daemons.cpu import ExecutionPlan
    from tests.cpu.test_cpu_mobile import Net
    import pathlib
    net = Net((1, 32, 20, 20))
    net.conv(net.conv("data", 64), 64)
    network = net.network(pathlib.Path(tempfile.mkdtemp()))
    before = len(os.listdir("/proc/self/task"))
    plan = ExecutionPlan(network, backend="onednn", precision="f32", threads=2)
    loaded = len(os.listdir("/proc/self/task"))
    x = np.ones(net.shape["data"], np.float32)
    seen = []
    def run():
        plan.infer({"data": x})
        seen.append(len(os.listdir("/proc/self/task")))
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    print(before, loaded, seen[0])
"""


def test_loading_leaves_no_openmp_team_on_the_loading_thread():
    """Weights are reordered at load on the loading thread alone (Dnnl.one_thread): a
    team of OpenMP threads left there would make libgomp stop spinning at the barriers
    of the thread that runs the requests (more team threads than CPUs)."""
    proc = _run_python(LOAD_THEN_RUN_ELSEWHERE, MO_CORE_CPU_BACKEND="onednn")
    assert proc.returncode == 0, proc.stderr
    before, loaded, running = map(int, proc.stdout.split())
    assert loaded == before, (before, loaded)  # the weights reorders started no thread
    assert running == before + 2, (before, running)  # the request's thread and its one OpenMP helper


def test_requests_that_ran_side_by_side_keep_sharing_the_cores_a_moment():
    import types

    from device_daemons.cpu import plan_pool
    pool = types.SimpleNamespace(busy=1, _side_by_side=(1, 0.0))
    note = plan_pool.PlanPool._note_side_by_side  # (acquire calls it as a request starts and ends)
    concurrent = plan_pool.PlanPool.concurrent.fget
    note(pool)
    assert concurrent(pool) == 1
    pool.busy = 2
    note(pool)
    assert concurrent(pool) == 2
    pool.busy = 1  # the other one is between two requests: this one still takes half the cores
    assert concurrent(pool) == 2 and concurrent(pool) == 2  # (reading it changes nothing)
    pool._side_by_side = (2, 0.0)  # SIDE_BY_SIDE_S later
    assert concurrent(pool) == 1


def test_team_choice_measures_both_team_sizes_then_keeps_the_faster(monkeypatch):
    """TeamChoice's bookkeeping on given times (the daemon's, measured: tests/daemon/test_iecore.py): the
    whole team runs the first TEAM_FIRST + 1 requests, then the two sizes alternate until each has
    EXPLORE_RUNS + 1 timed requests, the lower second fastest wins (a first run left out), and after EXPLORE_EVERY
    requests or EXPLORE_EVERY_S seconds both are measured again."""
    from device_daemons.cpu import plan_pool
    monkeypatch.setattr(plan_pool, "EXPLORE_EVERY", 10)
    choice = plan_pool.TeamChoice(2)
    speed = {2: 3e-3, 1: 1e-3}  # (one thread faster, as on an unrolled LSTM here)
    seen = []
    while choice.chosen is None:
        threads = choice.threads()
        first = {2: 15e-3, 1: 1.0}  # (first runs: cold caches, past EXPLORE_BELOW_US; one thread's compiles)
        choice.observe(threads, first[threads] if threads not in seen else speed[threads])
        seen.append(threads)
    assert seen[:5] == [2, 2, 2, 1, 2] and len(seen) == plan_pool.CHOICE_REQUESTS
    assert choice.chosen == 1 and {choice.threads() for _ in range(9)} == {1}
    choice.observe(2, 9.0)  # (a request that started before the choice: ignored)
    assert choice.chosen == 1
    speed = {2: 1e-3, 1: 3e-3}  # the machine changed
    assert choice.threads() == 1 and choice.chosen is None  # the 10th request: measured again after it
    while choice.chosen is None:
        threads = choice.threads()
        choice.observe(threads, speed[threads])
    assert choice.chosen == 2
    alone = plan_pool.TeamChoice(1)
    assert alone.chosen == 1 and alone.threads() == 1
    slow = plan_pool.EXPLORE_BELOW_US * 1e-6
    large = plan_pool.TeamChoice(2)  # its whole team's timed requests take EXPLORE_BELOW_US: never one thread
    for t in (3 * slow, slow, 1.5 * slow):
        assert large.threads() == 2
        large.observe(2, t)
    assert large.chosen == 2
    hiccup = plan_pool.TeamChoice(2)  # one slow timed request among fast ones decides nothing
    for t in (3 * slow, slow, 0.1 * slow):
        assert hiccup.threads() == 2
        hiccup.observe(2, t)
    assert hiccup.chosen is None and hiccup.threads() == 1
    for one, kept in ((0.42e-3, 1), (0.48e-3, 2), (plan_pool.SPIN_S + 0.04e-3, 2)):
        # one thread a little slower than the team: kept where its client polls for the reply (compute below
        # SPIN_S), by up to what the polling saves (POLL_GAIN_S); not where the client sleeps either way
        close = plan_pool.TeamChoice(2)
        while close.chosen is None:
            threads = close.threads()
            close.observe(threads, one if threads == 1 else one - 0.03e-3 if one > plan_pool.SPIN_S else 0.41e-3)
        assert close.chosen == kept, one
    disturbed = plan_pool.TeamChoice(2)  # most of the team's timed requests slowed 3x, two not: still the team
    team_times = iter([15e-3, 1e-3, 3e-3, 3e-3, 1.1e-3] + [3e-3] * 9)  # (the median would pick one thread)
    while disturbed.chosen is None:
        threads = disturbed.threads()
        disturbed.observe(threads, 2e-3 if threads == 1 else next(team_times))
    assert disturbed.chosen == 2
    now = [0.0]
    timed = plan_pool.TeamChoice(2, clock=lambda: now[0])  # a choice lasts EXPLORE_EVERY_S at most
    while timed.chosen is None:
        threads = timed.threads()
        timed.observe(threads, {2: 1e-3, 1: 2e-3}[threads])
    assert timed.chosen == 2 and timed.threads() == 2 and timed.chosen == 2
    now[0] += plan_pool.EXPLORE_EVERY_S
    assert timed.threads() == 2 and timed.chosen is None  # (measured again from the next request)


def test_plan_pool_makes_one_threads_program_with_the_plan(tmp_path, monkeypatch):
    """The program a request on one thread runs (the team choice's, or two requests side by
    side) is made with each plan instance, so no request waits for a compile."""
    from benchmarks.infer import trivial_ir
    from device_daemons.cpu import plan as plan_module
    from device_daemons.cpu.plan_pool import PlanPool
    from ir import read_ir
    network = read_ir(trivial_ir(str(tmp_path)))
    pool = PlanPool(("k",), network, {}, None, 2, "test", threads=2)
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)

    def no_compile(*args, **kwargs):
        raise AssertionError("a program was made by a request")
    with pool.acquire() as first:
        with pool.acquire() as second:  # (compiled on demand: its one-thread program with it)
            monkeypatch.setattr(plan_module, "build_program", no_compile)
            for plan in (first, second):
                assert plan.threads == 2 and plan._shared_programs[1].threads == 1
                np.testing.assert_array_equal(plan.infer({"data": x}, concurrent=2)["relu"], np.maximum(x, 0))


def test_plan_pool_lends_waits_and_compiles_up_to_its_limit(tmp_path):
    """PlanPool.acquire: an idle instance when there is one, one more compiled while fewer
    than max_instances exist, else a wait for the first given back; a failed compile
    gives its place back."""
    from benchmarks.infer import trivial_ir
    from device_daemons.cpu.plan_pool import PlanPool
    from ir import read_ir
    network = read_ir(trivial_ir(str(tmp_path)))
    pool = PlanPool(("k",), network, {}, None, 2, "test")
    with pool.acquire() as first:
        with pool.acquire() as second:  # the one instance is busy: a second one is compiled
            assert second is not first and pool.instances == 2 and pool.busy == 2
            got, started = [], threading.Event()

            def third():
                started.set()
                with pool.acquire() as plan:  # both busy, at the limit: waits
                    got.append(plan)
            t = threading.Thread(target=third)
            t.start()
            started.wait()
            t.join(0.2)
            assert t.is_alive() and not got and pool.instances == 2
        t.join(5)  # `second` given back: the waiting request takes it
        assert got == [second] and pool.busy == 1
    assert pool.busy == 0 and pool.instances == 2
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    with pool.acquire() as plan:
        np.testing.assert_array_equal(plan.infer({"data": x})["relu"], np.maximum(x, 0))

    def fail():
        raise RuntimeError("compile failed")
    pool._make, pool._max = fail, 3
    with pool.acquire(), pool.acquire():
        with pytest.raises(RuntimeError, match="compile failed"):
            with pool.acquire():
                pass
        assert pool.instances == 2  # (the failed one's place given back)
    assert pool.busy == 0


def test_memory_points_at_the_buffer_it_is_given():
    """Memory.set_buffer (per request, for the network's inputs and outputs): oneDNN's
    handle is the array's data, contiguous or not (then its first element)."""
    from device_daemons.cpu.onednn.library import load
    from device_daemons.cpu.onednn.primitives import Desc, Memory
    d = load()
    memory = Memory(d, Desc.plain(d, (2, 3)))
    handle = d.ffi.new("void **")
    for buffer in (np.zeros((2, 3), np.float32), np.zeros((4, 6), np.float32)[::2, ::2]):
        memory.set_buffer(buffer)
        assert d.lib.dnnl_memory_get_data_handle(memory.mem, handle) == 0
        assert int(d.ffi.cast("uintptr_t", handle[0])) == buffer.__array_interface__["data"][0]
        assert memory.buffer is buffer
    with pytest.raises(ValueError, match="buffer of 8 bytes"):
        memory.set_buffer(np.zeros(2, np.float32))


# InceptionV2's stem as the OD API exports it: a depthwise 7x7 with channel multiplier 8 (3 -> 24 channels,
# a tensor oneDNN blocks by 8 on AVX-512, with AVX2 kernels only), then convolutions of 64 channels
STEM = (conv("dw", "data", "dw", 24, "kernel_size: 7 stride: 2 pad: 3 group: 3")
        + conv("pw", "dw", "pw", 64, "kernel_size: 1") + layer("ReLU", "r1", "pw", "pw")
        + conv("c3", "pw", "c3", 64) + layer("ReLU", "r3", "c3", "c3")
        + layer("Pooling", "pool", "c3", "pool", "pooling_param { pool: MAX kernel_size: 3 stride: 2 }")
        + conv("c4", "pool", "c4", 64))


def test_a_narrow_layer_does_not_keep_the_layers_after_it_on_narrower_kernels(tmp_path):
    """A convolution reads its producer's layout only where oneDNN has a kernel for it as wide
    as the one it would pick itself: the 8-channel-blocked 24-channel tensor is reordered once,
    the layers after it run at the machine's widest (they kept AVX2 kernels before: the OD API's
    Faster R-CNN ran its whole first stage on them, ~10% slower). Machine-independent: on an
    AVX2-only CPU every kernel is AVX2."""
    from device_daemons.cpu.onednn.convolution import _worth_following, isa_rank
    from device_daemons.cpu.onednn.library import load
    c = caffe_case(tmp_path, STEM, {"data": (1, 3, 64, 80)}, scale=0.3)
    ours, ref = c.run()
    assert_close(ours["c4"], ref["c4"], 1e-4, "c4")
    convs = {step.name: step.prims[0].implementation for step in c.plan.program.steps if step.type == "Convolution"}
    assert len(convs) == 4, convs
    d = load()
    isas = {getattr(d.lib, n): n[len("dnnl_cpu_isa_"):] for n in dir(d.lib) if n.startswith("dnnl_cpu_isa_")}
    machine = min(3, isa_rank(":" + isas[d.lib.dnnl_get_effective_cpu_isa()]))  # (f32 kernels: no AMX)
    narrower = {name: impl for name, impl in convs.items() if name != "dw" and isa_rank(impl) < machine}
    assert not narrower, (narrower, convs, isas[d.lib.dnnl_get_effective_cpu_isa()])
    rows = perf_rows(c.plan, c.inputs)  # -pc names each kernel
    assert {name: rows[name].kernel for name in convs} == convs
    assert isa_rank("jit:avx2") == 2 and isa_rank("brgconv_1x1:avx512_core") == 3 and isa_rank("ref:any") == 0
    assert isa_rank("brgconv:avx512_core_amx") == 4 and isa_rank("jit:sse41") == 1
    assert not _worth_following("jit_1x1:avx2", "brgconv_1x1:avx512_core")
    assert _worth_following("jit:avx512_core", "brgconv:avx512_core")
    assert not _worth_following("gemm:jit", "jit:avx2") and not _worth_following("ref:any", "ref:any")


def test_a_grouped_convolution_that_oneDNN_would_run_on_gemm_gets_a_direct_kernel(tmp_path):
    """The OD API SSD Inception's stem (3 -> 21 channels in 3 groups, 7x7, stride 2): oneDNN answers a
    layout left to it ("any") with gemm on plain NCHW, twice as slow as its direct kernel on a layout
    named outright (ConvolutionOp._fast_layout); the answer equals Caffe's either way."""
    from device_daemons.cpu.onednn import convolution
    stem = conv("dw", "data", "dw", 21, "kernel_size: 7 stride: 2 pad: 3 group: 3") + conv("pw", "dw", "pw", 64,
                                                                                          "kernel_size: 1")
    chosen = []
    original = convolution.ConvolutionOp._fast_layout

    def spy(op, src_dims, dst_dims):
        pd = original(op, src_dims, dst_dims)
        chosen.append((op.layer.name, pd and pd.implementation))
        return pd
    convolution.ConvolutionOp._fast_layout = spy
    try:
        c = caffe_case(tmp_path, stem, {"data": (1, 3, 48, 56)}, scale=0.3)
    finally:
        convolution.ConvolutionOp._fast_layout = original
    ours, ref = c.run()
    assert_close(ours["pw"], ref["pw"], 1e-4, "pw")
    kernels = {step.name: step.prims[0].implementation for step in c.plan.program.steps if step.type == "Convolution"}
    assert [name for name, _ in chosen] == ["dw"] and convolution._fast(kernels["dw"]), (chosen, kernels)
    assert chosen[0][1] == kernels["dw"]
