"""3-D windows over NCDHW volumes on the GPU plan (kernels/volume.cl: conv3d, deconv3d, pool3d) against the CPU
plan (its volume.py), on real OpenCL (PoCL here): Convolution (padded, asymmetric pads and strides, dilated,
grouped, depthwise, with and without bias), Deconvolution (strided, odd outputs from an end padding, grouped,
dilated), Pooling (max / avg, both exclude-pad modes, ceil and floor rounding, end pads larger than the begin
ones, global), FP32 within 1e-4 and FP16 (half storage) within 1e-2 of the CPU plan; every layer runs on the
GPU (an OpenCL launch of its own or fused into one), the fusions of the plan (activation, Eltwise sum, Concat
slice) work on them, and the tuner never gives a volume a 2-D configuration."""
from __future__ import annotations

import numpy as np
import pytest

from tests.cpu.cpu_helpers import rel_err
from tests.gpu.gpu_helpers import both_plans, graph_ir, rand, single_layer_ir

TOL = {"FP32": 1e-4, "FP16": 1e-2}
PRECISIONS = ["FP32", "FP16"]


def triple(values) -> str:
    return ",".join(str(int(v)) for v in values)


def conv_out(size, k, s, p, pe, d=(1, 1, 1)):
    return tuple((n + a + b - dd * (kk - 1) - 1) // ss + 1 for n, kk, ss, a, b, dd in zip(size, k, s, p, pe, d))


def deconv_out(size, k, s, p, pe, d=(1, 1, 1)):
    return tuple(ss * (n - 1) + dd * (kk - 1) + 1 - a - b for n, kk, ss, a, b, dd in zip(size, k, s, p, pe, d))


def pool_out(size, k, s, p, pe, ceil):
    """Caffe's rule (ir/pooling.py) per axis: with any padding, a last window starting in the end padding is
    dropped."""
    out = []
    for n, kk, ss, a, b in zip(size, k, s, p, pe):
        span = n + a + b - kk
        o = (-(-span // ss) if ceil else span // ss) + 1
        if ceil and any(p) and (o - 1) * ss >= n + a:
            o -= 1
        out.append(o)
    return tuple(out)


def window(k, s, p, pe, d=None) -> dict:
    data = {"kernel": triple(k), "strides": triple(s), "pads_begin": triple(p), "pads_end": triple(pe)}
    if d is not None:
        data["dilations"] = triple(d)
    return data


def assert_on_gpu(plan, feed):
    """Every layer is the GPU's (query_network) and ran as an OpenCL launch of its own or in one (fused)."""
    from device_daemons.gpu.query import query_network
    net = plan.network
    assert set(query_network(net)) == {layer.name for layer in net.layers}
    perf = []
    plan.infer(feed, perf)
    for row in perf:
        assert (row.backend, row.status) == ("opencl", "executed") or row.status == "fused", \
            (row.name, row.backend, row.status)
    assert not any(step.kernel.host for step in plan.steps)


def compare(network, device, feed, precision, **gpu_options):
    """Runs `network` on both plans, checks every output (max |diff| / max |ref| <= TOL) and that everything
    ran on the GPU; returns the GPU plan."""
    cpu, gpu = both_plans(network, device, **gpu_options)
    assert gpu.warnings == [], gpu.warnings
    ref, ours = cpu.infer(feed), gpu.infer(feed)
    assert sorted(ours) == sorted(ref)
    for key in ref:
        assert ours[key].shape == ref[key].shape
        err = rel_err(ours[key], ref[key])
        assert err <= TOL[precision], f"{key}: max |diff| / max |ref| = {err:.3g} > {TOL[precision]}"
    assert_on_gpu(gpu, feed)
    return gpu


def one_layer(tmp_path, device, layer_type, data, x, out_shape, blobs, precision, **gpu_options):
    network = single_layer_ir(tmp_path, layer_type, data, [x.shape], [out_shape], blobs, precision)
    return compare(network, device, {"in0": x}, precision, **gpu_options)


# name: (input N, C, D, H, W; output channels, group, kernel, stride, pad, pad_end, dilation, bias)
CONVOLUTIONS = {
    "k3_pad1": ((2, 3, 5, 6, 7), 5, 1, (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), True),
    "asymmetric_strided": ((1, 4, 5, 7, 6), 11, 1, (2, 3, 1), (1, 2, 2), (1, 0, 0), (0, 2, 1), (1, 1, 1), True),
    "dilated": ((1, 3, 7, 6, 8), 4, 1, (3, 3, 3), (1, 1, 2), (2, 1, 2), (2, 1, 0), (2, 1, 2), False),
    "grouped": ((1, 6, 5, 4, 7), 10, 2, (3, 2, 3), (2, 1, 1), (1, 1, 0), (1, 0, 2), (1, 1, 1), True),
    "depthwise": ((2, 5, 4, 5, 6), 5, 5, (3, 3, 3), (1, 2, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), True),
}


@pytest.mark.parametrize("style", ["simt", "simd"])
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", sorted(CONVOLUTIONS))
def test_convolution3d(tmp_path, gpu_device, case, precision, style):
    shape, o, g, k, s, p, pe, d, bias = CONVOLUTIONS[case]
    rng = np.random.default_rng(len(case))
    n, c = shape[:2]
    out = (n, o) + conv_out(shape[2:], k, s, p, pe, d)
    data = dict(window(k, s, p, pe, d), output=o, group=g)
    blobs = {"weights": rand(rng, o, c // g, *k)}
    if bias:
        blobs["biases"] = rand(rng, o)
    plan = one_layer(tmp_path, gpu_device, "Convolution", data, rand(rng, *shape), out, blobs, precision,
                     style=style)
    kernel = plan.steps[0].kernel
    assert kernel.variant == "conv3d" and kernel.config == {"kernel": "volume"}


# name: (input N, C, D, H, W; output channels, group, kernel, stride, pad, pad_end, dilation)
DECONVOLUTIONS = {
    "stride2": ((2, 3, 3, 4, 5), 5, 1, (2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1)),
    "odd_output_pad_end": ((1, 4, 3, 4, 5), 9, 1, (3, 3, 3), (2, 2, 2), (1, 1, 1), (0, 1, 1), (1, 1, 1)),
    "grouped_dilated": ((1, 4, 3, 5, 4), 6, 2, (2, 3, 2), (1, 2, 2), (0, 1, 0), (1, 0, 1), (2, 1, 1)),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", sorted(DECONVOLUTIONS))
def test_deconvolution3d(tmp_path, gpu_device, case, precision):
    shape, o, g, k, s, p, pe, d = DECONVOLUTIONS[case]
    rng = np.random.default_rng(len(case))
    n, c = shape[:2]
    out = (n, o) + deconv_out(shape[2:], k, s, p, pe, d)
    data = dict(window(k, s, p, pe, d), output=o, group=g)
    blobs = {"weights": rand(rng, c, o // g, *k), "biases": rand(rng, o)}
    one_layer(tmp_path, gpu_device, "Deconvolution", data, rand(rng, *shape), out, blobs, precision)


# name: (kernel, stride, pad, pad_end, rounding)
POOLINGS = {
    "ceil_padded": ((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), "ceil"),
    "ceil_partial": ((2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0), "ceil"),
    "floor_end_pads": ((3, 2, 3), (2, 2, 1), (0, 0, 1), (2, 1, 2), "floor"),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("method,exclude", [("max", 0), ("avg", 0), ("avg", 1)])
@pytest.mark.parametrize("case", sorted(POOLINGS))
def test_pooling3d(tmp_path, gpu_device, case, method, exclude, precision):
    k, s, p, pe, rounding = POOLINGS[case]
    rng = np.random.default_rng(len(case))
    shape = (2, 3, 5, 7, 6)
    out = shape[:2] + pool_out(shape[2:], k, s, p, pe, rounding == "ceil")
    data = dict(window(k, s, p, pe), **{"pool-method": method, "exclude-pad": "true" if exclude else "false",
                                        "rounding_type": rounding})
    one_layer(tmp_path, gpu_device, "Pooling", data, rand(rng, *shape), out, None, precision)


@pytest.mark.parametrize("method", ["max", "avg"])
def test_global_pooling3d(tmp_path, gpu_device, method):
    rng = np.random.default_rng(5)
    shape = (2, 4, 3, 5, 6)
    data = dict(window((3, 5, 6), (1, 1, 1), (0, 0, 0), (0, 0, 0)), **{"pool-method": method})
    one_layer(tmp_path, gpu_device, "Pooling", data, rand(rng, *shape), (2, 4, 1, 1, 1), None, "FP32",
              style="simt")


def conv3d(name, source, rng, c, o, shape, k=3, pad=1):
    data = dict(window((k,) * 3, (1, 1, 1), (pad,) * 3, (pad,) * 3), output=o, group=1)
    return (name, "Convolution", data, {"weights": rand(rng, o, c, k, k, k), "biases": rand(rng, o)}, [source],
            (shape[0], o) + tuple(shape[2:]))


@pytest.mark.parametrize("style", ["simt", "simd"])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_fusions_on_volumes(tmp_path, gpu_device, precision, style):
    """conv3d + ReLU (fused), a conv3d + Eltwise sum (in its epilogue), two conv3d of one input and window (never
    siblings: each its own launch), a Concat whose inputs the convolutions write in place, a 3-D max pooling
    (never read through) and a 3-D deconvolution with its ReLU fused."""
    rng = np.random.default_rng(7)
    shape = (2, 3, 4, 5, 6)
    inner, wide = (2, 4, 4, 5, 6), (2, 8, 4, 5, 6)
    pool = window((2, 2, 2), (1, 1, 1), (0, 0, 0), (1, 1, 1))
    deconv = dict(window((2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0)), output=3, group=1)
    layers = [conv3d("a", "data", rng, 3, 4, shape),
              ("ra", "ReLU", {}, None, ["a"], inner),
              conv3d("b", "ra", rng, 4, 4, inner),
              ("sum", "Eltwise", {"operation": "sum"}, None, ["b", "ra"], inner),
              conv3d("c", "ra", rng, 4, 4, inner),
              ("cat", "Concat", {"axis": 1}, None, ["sum", "c"], wide),
              ("pool", "Pooling", dict(pool, **{"pool-method": "max", "rounding_type": "floor"}), None, ["cat"],
               wide),
              ("up", "Deconvolution", deconv, {"weights": rand(rng, 8, 3, 2, 2, 2), "biases": rand(rng, 3)},
               ["pool"], (2, 3, 8, 10, 12)),
              ("rup", "ReLU", {"negative_slope": 0.1}, None, ["up"], (2, 3, 8, 10, 12))]
    plan = compare(graph_ir(tmp_path, shape, layers, precision), gpu_device, {"data": rand(rng, *shape)}, precision,
                   style=style)
    steps = {st.layer.name: st for st in plan.steps}
    assert {name for name, st in steps.items() if st.fused} == {"ra", "sum", "rup"}
    assert steps["ra"].fused_into == "a" and steps["sum"].fused_into == "b" and steps["rup"].fused_into == "up"
    assert steps["b"].residual == steps["ra"].out_slots[0]
    assert steps["b"].kernel.place == (0, 8 * 4 * 5 * 6) and steps["c"].kernel.place == (4 * 4 * 5 * 6, 8 * 4 * 5 * 6)
    assert steps["cat"].kernel.skip == {0, 1}
    assert not steps["pool"].merged_into and not any(st.merged_into for st in plan.steps)
    assert [steps[n].kernel.variant for n in "abc"] == ["conv3d"] * 3


def test_tuner_gives_volumes_their_kernel_only(tmp_path, gpu_device):
    """A search lists the volume kernel alone (never the 2-D GEMMs, Winograd, the direct 2-D kernels); a pinned or
    cached 2-D configuration is refused for a 3-D layer (it takes its own), the volume one for a 2-D layer."""
    from device_daemons.gpu.kernels.base import ConfigRejected
    from device_daemons.gpu.tuning import Tuner, TuneCache
    rng = np.random.default_rng(9)
    shape = (1, 3, 4, 5, 6)
    data = dict(window((3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1)), output=4, group=1)
    network = single_layer_ir(tmp_path, "Convolution", data, [shape], [(1, 4, 4, 5, 6)],
                              {"weights": rand(rng, 4, 3, 3, 3, 3)})
    feed = {"in0": rand(rng, *shape)}
    tiled = {"kernel": "tiled", "tm": 16, "tn": 32, "tk": 8, "wm": 2, "wn": 4, "ks": 1}
    for tuner in (Tuner(gpu_device, "full", cache=TuneCache(gpu_device, str(tmp_path / "cache"))),
                  Tuner(gpu_device, "0", pinned=tiled), Tuner(gpu_device, "0", pinned={"kernel": "direct"})):
        plan = compare(network, gpu_device, feed, "FP32", style="simt", tuner=tuner)
        kernel = plan.steps[0].kernel
        for mode in ("default", "1", "full"):
            assert kernel.configs(mode) == [{"kernel": "volume"}]
        assert kernel.config == {"kernel": "volume"} and kernel.variant == "conv3d"
        assert tuner.report[-1]["how"] in ("only", "heuristic") and tuner.report[-1]["key"].split(":")[2] == "conv3d"
        for config in (tiled, {"kernel": "direct"}, {"kernel": "gemm"}, {"kernel": "depthwise"},
                       dict(tiled, kernel="wino")):
            with pytest.raises(ConfigRejected):
                kernel.use(config)
    flat = single_layer_ir(tmp_path, "Convolution", {"kernel": "3,3", "pads_begin": "1,1", "pads_end": "1,1",
                                                     "output": 4}, [(1, 3, 5, 6)], [(1, 4, 5, 6)],
                           {"weights": rand(rng, 4, 3, 3, 3)}, name="flat")
    _, plan = both_plans(flat, gpu_device, style="simt")
    assert {"kernel": "volume"} not in plan.steps[0].kernel.configs("full")
    with pytest.raises(ConfigRejected):
        plan.steps[0].kernel.use({"kernel": "volume"})
