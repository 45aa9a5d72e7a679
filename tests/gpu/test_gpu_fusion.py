"""Fewer launches in the GPU plan, against the CPU plan on real OpenCL (PoCL):
Eltwise sums run in the epilogue of the convolution that makes one of their
inputs (then the activation after them too), and Concat inputs are written by
their producers (convolutions, Permute through Flatten) straight into their
slice of the Concat's buffer; every kernel family, FP32 and FP16, batch 2."""
from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.gpu_helpers import compare_plans, graph_ir, rand

# (style, pinned configuration): each kernel family of a convolution
FAMILIES = [("simt", None), ("simt", {"kernel": "direct"}), ("simd", None),
            ("simt", {"kernel": "tiled", "tm": 16, "tn": 32, "tk": 8, "wm": 2, "wn": 4, "ks": 2})]
FAMILY_IDS = ["tiled", "direct", "simd_gemm", "tiled_ks2"]


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
