"""Fewer launches in the GPU plan, against the CPU plan on real OpenCL (PoCL):
Eltwise sums run in the epilogue of the convolution that makes one of their
inputs (then the activation after them too), Concat inputs are written by
their producers (convolutions, Permute through Flatten) straight into their
slice of the Concat's buffer, and sibling convolutions (one input, one window)
run as one GEMM; every kernel family, FP32 and FP16, batch 2."""
from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.gpu_helpers import compare_plans, graph_ir, rand

# (style, pinned configuration): each kernel family of a convolution
FAMILIES = [("simt", None), ("simt", {"kernel": "direct"}), ("simd", None),
            ("simt", {"kernel": "tiled", "tm": 16, "tn": 32, "tk": 8, "wm": 2, "wn": 4, "ks": 2}),
            ("simt", {"kernel": "wino", "tm": 16, "tn": 32, "tk": 8, "wm": 2, "wn": 4, "ks": 1})]
FAMILY_IDS = ["tiled", "direct", "simd_gemm", "tiled_ks2", "winograd"]  # (winograd: the 3x3 layers)


def conv(name, source, rng, c, o, shape, k=3, pad=1, group=1):
    data = {"kernel": f"{k},{k}", "strides": "1,1", "pads_begin": f"{pad},{pad}", "pads_end": f"{pad},{pad}",
            "output": o, "group": group}
    return (name, "Convolution", data, {"weights": rand(rng, o, c // group, k, k), "biases": rand(rng, o)},
            [source], (shape[0], o) + tuple(shape[2:]))


def steps(plan):
    return {st.layer.name: st for st in plan.steps}


@pytest.mark.parametrize("precision", ["FP32", "FP16"])
@pytest.mark.parametrize("style,config", FAMILIES, ids=FAMILY_IDS)
def test_residual_blocks_fuse_the_sum_and_its_activation(tmp_path, gpu_device, style, config, precision):
    """ResNet's two blocks: an identity shortcut (the sum goes to the block's last
    convolution, its other input made earlier) and a projection shortcut made
    after the main branch (the sum goes to the projection, the later producer);
    a depthwise convolution takes a sum too."""
    rng = np.random.default_rng(3)
    shape = (2, 6, 7, 9)
    wide = (2, 10, 7, 9)
    layers = [conv("a", "data", rng, 6, 6, shape),
              conv("b", "a", rng, 6, 6, shape),
              ("sum1", "Eltwise", {"operation": "sum"}, None, ["b", "a"], shape),
              ("relu1", "ReLU", {}, None, ["sum1"], shape),
              conv("main", "relu1", rng, 6, 10, shape),
              conv("proj", "relu1", rng, 6, 10, shape, k=1, pad=0),
              ("sum2", "Eltwise", {"operation": "sum"}, None, ["main", "proj"], wide),
              ("relu2", "ReLU", {"negative_slope": 0.1}, None, ["sum2"], wide),
              conv("dw", "relu2", rng, 10, 10, wide, group=10),
              ("sum3", "Eltwise", {"operation": "sum"}, None, ["relu2", "dw"], wide)]
    x = rand(rng, *shape)
    plan = compare_plans(graph_ir(tmp_path, shape, layers, precision), gpu_device, {"data": x}, precision,
                         style=style, config=config)
    s = steps(plan)
    assert {n for n, st in s.items() if st.fused} == {"sum1", "relu1", "sum2", "relu2", "sum3"}
    assert s["sum1"].fused_into == s["relu1"].fused_into == "b"
    assert s["sum2"].fused_into == s["relu2"].fused_into == "proj"  # the later producer of the two
    assert s["sum3"].fused_into == "dw"
    assert [s[n].residual for n in ("b", "proj", "dw")] == [s["a"].out_slots[0], s["main"].out_slots[0],
                                                            s["relu2"].out_slots[0]]
    assert all(s[n].kernel.residual for n in ("b", "proj", "dw"))
    if config and config["kernel"] == "wino":  # the sum in Winograd's output transform
        assert s["b"].kernel.variant == s["main"].kernel.variant == "winograd"


def test_sums_that_cannot_run_in_an_epilogue_stay_layers(tmp_path, gpu_device):
    """Coefficients other than 1, a convolution output that is also returned, and a
    sum of two non-convolutions keep their Eltwise launch."""
    rng = np.random.default_rng(4)
    shape = (1, 4, 5, 6)
    layers = [conv("a", "data", rng, 4, 4, shape), conv("b", "a", rng, 4, 4, shape),
              ("scaled", "Eltwise", {"operation": "sum", "coeff": "1,0.5"}, None, ["b", "a"], shape),
              conv("c", "scaled", rng, 4, 4, shape),
              ("kept", "Eltwise", {"operation": "sum"}, None, ["c", "scaled"], shape),
              ("r1", "ReLU", {}, None, ["kept"], shape), ("r2", "ReLU", {}, None, ["kept"], shape),
              ("plain", "Eltwise", {"operation": "sum"}, None, ["r1", "r2"], shape)]
    plan = compare_plans(graph_ir(tmp_path, shape, layers), gpu_device, {"data": rand(rng, *shape)}, extra=["c"],
                         style="simt")
    assert not any(st.fused for st in plan.steps)
    assert all(st.residual is None for st in plan.steps)


def inception(rng, shape, source="data"):
    """GoogLeNet's module in small: 1x1, 3x3 (after a 1x1), 5x5, pool -> 1x1, each
    with a ReLU, concatenated along the channels."""
    n, c, h, w = shape
    out = (n, 3 + 5 + 2 + 4, h, w)
    pool = {"kernel": "3,3", "strides": "1,1", "pads_begin": "1,1", "pads_end": "1,1", "pool-method": "max"}
    layers = [conv("b1", source, rng, c, 3, shape, k=1, pad=0), ("b1r", "ReLU", {}, None, ["b1"], (n, 3, h, w)),
              conv("b2a", source, rng, c, 4, shape, k=1, pad=0), ("b2ar", "ReLU", {}, None, ["b2a"], (n, 4, h, w)),
              conv("b2", "b2ar", rng, 4, 5, shape), ("b2r", "ReLU", {}, None, ["b2"], (n, 5, h, w)),
              conv("b3", source, rng, c, 2, shape, k=5, pad=2), ("b3r", "ReLU", {}, None, ["b3"], (n, 2, h, w)),
              ("pool", "Pooling", pool, None, [source], shape),
              conv("b4", "pool", rng, c, 4, shape, k=1, pad=0), ("b4r", "ReLU", {}, None, ["b4"], (n, 4, h, w)),
              ("cat", "Concat", {"axis": 1}, None, ["b1r", "b2r", "b3r", "b4r"], out)]
    return layers, out


@pytest.mark.parametrize("precision", ["FP32", "FP16"])
@pytest.mark.parametrize("style,config", FAMILIES, ids=FAMILY_IDS)
def test_convolutions_write_into_their_concat_slice(tmp_path, gpu_device, style, config, precision):
    rng = np.random.default_rng(5)
    shape = (2, 6, 7, 5)
    layers, out = inception(rng, shape)
    layers.append(conv("after", "cat", rng, out[1], 3, out))  # the concatenated tensor is read as a whole
    plan = compare_plans(graph_ir(tmp_path, shape, layers, precision), gpu_device, {"data": rand(rng, *shape)},
                         precision, style=style, config=config)
    s = steps(plan)
    inner = 7 * 5
    assert [s[n].kernel.place for n in ("b1", "b2", "b3", "b4")] == [(0, 14 * inner), (3 * inner, 14 * inner),
                                                                     (8 * inner, 14 * inner), (10 * inner, 14 * inner)]
    assert s["cat"].kernel.skip == {0, 1, 2, 3}
    assert s["cat"].kernel.launches([plan.ctx.dummy] * 4, [plan.ctx.dummy]) == []  # no copy at all
    if config and config["kernel"] == "wino":  # b2 (3x3) writes its slice from Winograd's output transform
        assert s["b2"].kernel.variant == "winograd"
    g = plan._groups
    assert len({g.find(s[n].out_slots[0]) for n in ("b1", "b1r", "b2", "b4r", "cat")}) == 1
    # b2a is read by b2, not by the Concat: a buffer of its own
    assert s["b2a"].kernel.place is None and g.find(s["b2a"].out_slots[0]) != g.find(s["cat"].out_slots[0])


def test_inputs_that_cannot_be_written_in_place_are_copied(tmp_path, gpu_device):
    """A producer that another layer reads too, a returned output, the network
    input, a pooling (no in-place writer) and a tensor given twice are copied;
    the others are still written in place. Reshaped to another batch, the
    offsets follow."""
    rng = np.random.default_rng(6)
    shape = (1, 3, 6, 6)
    pool = {"kernel": "2,2", "strides": "1,1", "pads_begin": "0,0", "pads_end": "1,1", "pool-method": "avg"}
    layers = [conv("shared", "data", rng, 3, 4, shape), conv("reader", "shared", rng, 4, 2, shape),
              conv("returned", "data", rng, 3, 2, shape), conv("own", "data", rng, 3, 5, shape),
              ("pool", "Pooling", pool, None, ["data"], shape),
              conv("twice", "data", rng, 3, 2, shape),
              ("cat", "Concat", {"axis": 1}, None, ["shared", "returned", "own", "data", "pool", "twice", "twice",
                                                    "reader"], (1, 4 + 2 + 5 + 3 + 3 + 2 + 2 + 2, 6, 6))]
    network = graph_ir(tmp_path, shape, layers)
    plan = compare_plans(network, gpu_device, {"data": rand(rng, *shape)}, extra=["returned"], style="simt")
    s = steps(plan)
    assert s["cat"].kernel.skip == {2, 7}
    assert [n for n in ("shared", "returned", "own", "twice", "reader") if s[n].kernel.place] == ["own", "reader"]
    plan.reshape({"data": (3, 3, 6, 6)})
    x = rand(rng, 3, 3, 6, 6)
    from device_daemons.cpu import ExecutionPlan
    ref = ExecutionPlan(network, extra_outputs=["returned"])
    ref.reshape({"data": x.shape})
    expected, ours = ref.infer({"data": x}), plan.infer({"data": x})
    assert s["own"].kernel.place == (6 * 36, 23 * 36)
    for key in expected:
        np.testing.assert_allclose(ours[key], expected[key], rtol=1e-5, atol=1e-5 * np.abs(expected[key]).max())


def test_ssd_heads_permute_through_flatten_into_the_concat(tmp_path, gpu_device):
    """SSD's multibox heads: convolution -> Permute (NCHW -> NHWC) -> Flatten ->
    Concat along axis 1; the Permutes write into the Concat's buffer."""
    rng = np.random.default_rng(7)
    shape = (2, 4, 5, 3)
    layers = [conv("loc1", "data", rng, 4, 8, shape),
              ("perm1", "Permute", {"order": "0,2,3,1"}, None, ["loc1"], (2, 5, 3, 8)),
              ("flat1", "Flatten", {"axis": 1}, None, ["perm1"], (2, 120)),
              ("pool", "Pooling", {"kernel": "2,2", "strides": "2,2", "pads_begin": "0,0", "pads_end": "0,1",
                                   "pool-method": "max"}, None, ["data"], (2, 4, 3, 2)),
              conv("loc2", "pool", rng, 4, 6, (2, 4, 3, 2)),
              ("perm2", "Permute", {"order": "0,2,3,1"}, None, ["loc2"], (2, 3, 2, 6)),
              ("flat2", "Flatten", {"axis": 1}, None, ["perm2"], (2, 36)),
              ("cat", "Concat", {"axis": 1}, None, ["flat1", "flat2"], (2, 156))]
    plan = compare_plans(graph_ir(tmp_path, shape, layers), gpu_device, {"data": rand(rng, *shape)})
    s = steps(plan)
    assert s["perm1"].kernel.place == (0, 156) and s["perm2"].kernel.place == (120, 156)
    assert s["cat"].kernel.skip == {0, 1}


SIBLING_TILES = [None, {"kernel": "tiled", "tm": 16, "tn": 16, "tk": 8, "wm": 2, "wn": 2, "ks": 3},
                 {"kernel": "tiled", "tm": 32, "tn": 16, "tk": 16, "wm": 4, "wn": 2, "ks": 1},
                 {"kernel": "tiled", "tm": 32, "tn": 16, "tk": 16, "wm": 4, "wn": 4, "ks": 2, "vec": 1}]


def merged_steps(tmp_path, gpu_device, shape, layers, rng, precision, style, config):
    """The plan of `layers` (checked against the CPU plan), its steps by layer name and
    the names of the layers merged into another's launch."""
    plan = compare_plans(graph_ir(tmp_path, shape, layers, precision), gpu_device, {"data": rand(rng, *shape)},
                         precision, style=style, config=config)
    s = steps(plan)
    return plan, s, {name for name, st in s.items() if st.merged_into}


@pytest.mark.parametrize("precision", ["FP32", "FP16"])
@pytest.mark.parametrize("style,config", [("simt", c) for c in SIBLING_TILES] + [("simd", None)],
                         ids=["simt", "simt_ks3", "simt_32x16", "simt_vec_ks2", "simd"])
def test_sibling_convolutions_run_as_one_gemm(tmp_path, gpu_device, style, config, precision):
    """An inception block's 1x1 convolutions of one input (b1 into the Concat,
    b2a and b3a into the 3x3 / 5x5 after them; b3a without bias, its ReLU leaky
    like the others') run as one GEMM launched by b1 in the GPU style, each channel
    written to its own layer's buffer (b1's at its Concat offset): odd channel
    counts, split K with empty slices, FP16. A 3x3 of the same input (another
    window) and a 1x1 with another activation stay apart; the CPU-device style
    keeps them all apart."""
    rng = np.random.default_rng(8)
    n, c, h, w = shape = (2, 7, 5, 9)
    leaky = {"negative_slope": 0.1}

    def relu(name, source, ch, data=None):
        return (name, "ReLU", data or leaky, None, [source], (n, ch, h, w))
    b3a = conv("b3a", "data", rng, c, 3, shape, k=1, pad=0)
    b3a = b3a[:3] + ({"weights": b3a[3]["weights"]},) + b3a[4:]
    layers = [conv("b1", "data", rng, c, 5, shape, k=1, pad=0), relu("b1r", "b1", 5),
              conv("b2a", "data", rng, c, 6, shape, k=1, pad=0), relu("b2ar", "b2a", 6),
              conv("b2", "b2ar", rng, 6, 4, shape), relu("b2r", "b2", 4),
              b3a, relu("b3ar", "b3a", 3),
              conv("b3", "b3ar", rng, 3, 2, shape, k=5, pad=2), relu("b3r", "b3", 2),
              conv("b4", "data", rng, c, 3, shape), relu("b4r", "b4", 3),
              conv("b5", "data", rng, c, 2, shape, k=1, pad=0), relu("b5r", "b5", 2, {"negative_slope": 0.0}),
              ("cat", "Concat", {"axis": 1}, None, ["b1r", "b2r", "b3r", "b4r", "b5r"], (n, 16, h, w))]
    plan, s, merged = merged_steps(tmp_path, gpu_device, shape, layers, rng, precision, style, config)
    if style == "simd":
        assert merged == set() and not s["b1"].kernel.siblings
        return
    assert merged == {"b2a", "b3a"} and {s[x].merged_into for x in merged} == {"b1"}
    assert [k.layer.name for k in s["b1"].kernel.siblings] == ["b2a", "b3a"]
    assert s["b1"].extra_writes == (s["b2a"].out_slots[0], s["b3a"].out_slots[0])
    assert not s["b4"].kernel.siblings and not s["b5"].kernel.siblings and not s["b5"].merged_into
    assert s["b1"].kernel.place == (0, 16 * h * w)
    request = plan.create_request()
    launched = [step.layer.name for step, *_ in request.actions]
    assert "b2a" not in launched and "b3a" not in launched and "b1" in launched
    if config is not None:
        assert s["b1"].kernel.config == config
    perf = []
    plan.infer({"data": rand(rng, *shape)}, perf)
    rows = {r.name: r for r in perf}
    assert rows["b2a"].status == "fused" and rows["b2a"].backend == "fused into b1"


def test_siblings_come_four_a_launch_and_can_be_turned_off(tmp_path, gpu_device, monkeypatch):
    """Six 1x1 convolutions of one input: the first four in one launch, the other
    two in another; MO_CORE_GPU_MERGE=0 launches each on its own. Reshaped to
    another batch, the merged launch follows."""
    from device_daemons.cpu import ExecutionPlan
    rng = np.random.default_rng(9)
    shape = (1, 5, 4, 6)
    names = [f"c{i}" for i in range(6)]
    layers = [conv(name, "data", rng, 5, 2 + i, shape, k=1, pad=0) for i, name in enumerate(names)]
    layers.append(("cat", "Concat", {"axis": 1}, None, names, (1, sum(2 + i for i in range(6)), 4, 6)))
    network = graph_ir(tmp_path, shape, layers)
    plan = compare_plans(network, gpu_device, {"data": rand(rng, *shape)}, style="simt")
    s = steps(plan)
    assert [s[x].merged_into for x in names] == ["", "c0", "c0", "c0", "", "c4"]
    plan.reshape({"data": (3, 5, 4, 6)})
    x = rand(rng, 3, 5, 4, 6)
    ref = ExecutionPlan(network)
    ref.reshape({"data": x.shape})
    np.testing.assert_allclose(plan.infer({"data": x})["cat"], ref.infer({"data": x})["cat"], rtol=1e-5,
                               atol=1e-5)
    monkeypatch.setenv("MO_CORE_GPU_MERGE", "0")
    alone = compare_plans(network, gpu_device, {"data": rand(rng, *shape)}, style="simt")
    assert not any(st.merged_into for st in alone.steps)


@pytest.mark.parametrize("precision", ["FP32", "FP16"])
@pytest.mark.parametrize("style,config", [("simt", c) for c in SIBLING_TILES] + [("simd", None)],
                         ids=["simt", "simt_ks3", "simt_32x16", "simt_vec_ks2", "simd"])
def test_a_max_pooling_is_read_through_by_the_1x1_convolution_after_it(tmp_path, gpu_device, style, config,
                                                                       precision):
    """GoogLeNet's pool -> pool_proj (3x3, stride 1, padding 1) and a 2x2 one padded
    at the end only: in the GPU style the 1x1 convolution takes each window's
    maximum in its loads and the pooling launches nothing; an average pooling, a
    max pooling read twice and one of stride 2 stay layers."""
    rng = np.random.default_rng(10)
    n, c, h, w = shape = (2, 5, 7, 6)

    def pool(name, source, k, pads, stride=1, method="max", out=None):
        data = {"kernel": f"{k},{k}", "strides": f"{stride},{stride}", "pads_begin": f"{pads[0]},{pads[0]}",
                "pads_end": f"{pads[1]},{pads[1]}", "pool-method": method}
        return (name, "Pooling", data, None, [source], out or shape)
    half = (n, c, 4, 4)
    layers = [pool("p3", "data", 3, (1, 1)), conv("proj3", "p3", rng, c, 4, shape, k=1, pad=0),
              ("proj3r", "ReLU", {}, None, ["proj3"], (n, 4, h, w)),
              pool("p2", "data", 2, (0, 1)), conv("proj2", "p2", rng, c, 3, shape, k=1, pad=0),
              pool("avg", "data", 3, (1, 1), method="avg"), conv("proja", "avg", rng, c, 2, shape, k=1, pad=0),
              pool("twice", "data", 3, (1, 1)), conv("t1", "twice", rng, c, 2, shape, k=1, pad=0),
              conv("t2", "twice", rng, c, 2, shape, k=3, pad=1),
              pool("strided", "data", 3, (1, 1), stride=2, out=half), conv("ps", "strided", rng, c, 2, half, k=1, pad=0),
              ("cat", "Concat", {"axis": 1}, None, ["proj3r", "proj2", "proja", "t1", "t2"], (n, 13, h, w))]
    plan, s, merged = merged_steps(tmp_path, gpu_device, shape, layers, rng, precision, style, config)
    if style == "simd":
        assert merged == set()
        return
    assert merged == {"p3", "p2"} and s["p3"].merged_into == "proj3" and s["p2"].merged_into == "proj2"
    assert s["proj3"].kernel.pooled == (3, 3, 1, 1) and s["proj2"].kernel.pooled == (2, 2, 0, 0)
    assert s["proj3"].in_slots == s["p3"].in_slots and s["proj3"].kernel.place == (0, 13 * h * w)
    assert all(s[x].kernel.pooled is None for x in ("proja", "t1", "t2", "ps"))
    launched = {step.layer.name for step, *_ in plan.create_request().actions}
    assert "p3" not in launched and "p2" not in launched and {"avg", "twice", "strided"} <= launched


def test_a_driver_that_cannot_build_the_merged_kernels_keeps_the_layers_apart(tmp_path, gpu_device, monkeypatch):
    """A unit test beside the real builds above: tiled.cl's SIBLINGS and POOLED
    variants refused by a stand-in for a driver that cannot compile them: the
    network still loads, with a warning each, its layers apart and right."""
    from device_daemons.cpu import ExecutionPlan
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.plan import EngineContext
    from device_daemons.gpu.programs import BuildError
    from tests.cpu.cpu_helpers import rel_err
    real = EngineContext.program

    def refusing(self, filename, half=None, defines=()):
        if "-DSIBLINGS" in defines or "-DPOOLED" in defines:
            raise BuildError("the OpenCL program tiled.cl does not compile here (a stand-in)")
        return real(self, filename, half, defines)
    monkeypatch.setattr(EngineContext, "program", refusing)
    rng = np.random.default_rng(11)
    shape = (1, 6, 5, 4)
    layers, _ = inception(rng, shape)
    network = graph_ir(tmp_path, shape, layers)
    plan = GpuPlan(network, gpu_device, style="simt")
    assert not any(st.merged_into for st in plan.steps)
    assert len(plan.warnings) == 2 and all("does not build" in w for w in plan.warnings)
    x = rand(rng, *shape)
    assert rel_err(plan.infer({"data": x})["cat"], ExecutionPlan(network).infer({"data": x})["cat"]) <= 1e-5


def test_sibling_convolutions_on_tensor_cores(tmp_path, gpu_device, mma):
    """Siblings in the tensor-core GEMM of a half plan (its emulation where the
    device has no tensor cores): each channel written to its own layer's buffer,
    b1's at its Concat offset, K cut into slices."""
    rng = np.random.default_rng(9)
    n, c, h, w = shape = (2, 7, 5, 9)
    layers = [conv("b1", "data", rng, c, 5, shape, k=1, pad=0), conv("b2a", "data", rng, c, 6, shape, k=1, pad=0),
              conv("b2", "b2a", rng, 6, 4, shape),
              ("cat", "Concat", {"axis": 1}, None, ["b1", "b2"], (n, 9, h, w))]
    config = {"kernel": "mma", "tm": 32, "tn": 64, "wtm": 32, "wtn": 32, "ks": 2}
    plan, s, merged = merged_steps(tmp_path, gpu_device, shape, layers, rng, "FP16", "simt", config)
    assert merged == {"b2a"} and s["b1"].kernel.config == config and s["b1"].kernel.variant == "conv_mma"
    assert s["b1"].kernel.place == (0, 9 * h * w)
