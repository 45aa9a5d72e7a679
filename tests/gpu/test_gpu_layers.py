"""Every GPU kernel against the CPU plugin's kernel of the same layer (the plan
objects, in-process, on real OpenCL: PoCL here), on random shapes with odd sizes,
FP32 and FP16 (half storage)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.gpu_helpers import compare_layer, rand

PRECISIONS = ["FP32", "FP16"]
SEEDS = [0, 1]
# the GPU-style kernels (the heuristic's choice of the tiled ones, and the kernels before tiling) and the
# CPU-device-style ones: all run on any device
KERNELS = [("simt", None), ("simt", {"kernel": "direct"}), ("simd", None)]
KERNEL_IDS = ["simt", "simt_direct", "simd"]
STYLES = ["simt", "simd"]  # the element-wise kernels: explicit work groups (simt) or the driver's (simd)


def pads(rng, k):
    return int(rng.integers(0, k)), int(rng.integers(0, k))


@pytest.mark.parametrize("style,config", KERNELS, ids=KERNEL_IDS)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("variant", ["direct", "strided_dilated_grouped", "pointwise", "pointwise_strided_grouped",
                                     "depthwise", "large_stride"])
@pytest.mark.parametrize("seed", SEEDS)
def test_convolution(tmp_path, gpu_device, seed, variant, precision, style, config):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3))
    k, s, d, g = {"direct": (3, 1, 1, 1), "strided_dilated_grouped": (3, 2, 2, 3), "pointwise": (1, 1, 1, 1),
                  "pointwise_strided_grouped": (1, 2, 1, 2), "depthwise": (3, 1, 1, 0),
                  "large_stride": (5, 3, 1, 1)}[variant]
    c = int(rng.integers(1, 4)) * (g or 1) if g else int(rng.integers(3, 12))
    g = g or c
    o = c if variant == "depthwise" else g * int(rng.integers(1, 12))
    h, w = (int(v) for v in rng.integers(k * d + 2, 19, size=2))
    (ph, pw), (ph2, pw2) = ((0, 0), (0, 0)) if k == 1 else (pads(rng, k), pads(rng, k))
    oh = (h + ph + ph2 - d * (k - 1) - 1) // s + 1
    ow = (w + pw + pw2 - d * (k - 1) - 1) // s + 1
    data = {"kernel": f"{k},{k}", "strides": f"{s},{s}", "dilations": f"{d},{d}", "pads_begin": f"{ph},{pw}",
            "pads_end": f"{ph2},{pw2}", "output": o, "group": g}
    blobs = {"weights": rand(rng, o, c // g, k, k), "biases": rand(rng, o)}
    _, plan = compare_layer(tmp_path, gpu_device, "Convolution", data, [rand(rng, n, c, h, w)], [(n, o, oh, ow)],
                            blobs, precision, style=style, config=config)
    if config is not None:  # pinned: even a depthwise layer runs it
        expected = "conv_1x1" if k == 1 else "conv_direct"
    else:
        expected = "conv_depthwise" if variant == "depthwise" else "conv_gemm" if style == "simd" else "conv_tiled"
    assert plan.steps[0].kernel.variant == expected


@pytest.mark.parametrize("style,config", KERNELS, ids=KERNEL_IDS)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("seed", SEEDS)
def test_convolution_without_bias_and_odd_channel_blocks(tmp_path, gpu_device, seed, precision, style, config):
    """13 output channels: one full block of 8 and a partial one."""
    rng = np.random.default_rng(seed)
    x = rand(rng, 1, 5, 7, 9)
    data = {"kernel": "3,2", "strides": "1,2", "pads_begin": "1,0", "pads_end": "0,1", "output": 13, "group": 1}
    compare_layer(tmp_path, gpu_device, "Convolution", data, [x], [(1, 13, 6, 5)],
                  {"weights": rand(rng, 13, 5, 3, 2)}, precision, style=style, config=config)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("k,s,p,d,g", [(4, 2, 1, 1, 1), (3, 2, 0, 1, 2), (3, 1, 1, 2, 1), (2, 3, 0, 1, 3)])
def test_deconvolution(tmp_path, gpu_device, k, s, p, d, g, precision):
    rng = np.random.default_rng(k * 10 + s)
    n, cin, h, w = 2, 3 * g, 5, 7
    o = 2 * g + 1 if g == 1 else 2 * g
    oh, ow = s * (h - 1) + d * (k - 1) + 1 - 2 * p, s * (w - 1) + d * (k - 1) + 1 - 2 * p
    data = {"kernel": f"{k},{k}", "strides": f"{s},{s}", "dilations": f"{d},{d}", "pads_begin": f"{p},{p}",
            "pads_end": f"{p},{p}", "output": o, "group": g}
    blobs = {"weights": rand(rng, cin, o // g, k, k), "biases": rand(rng, o)}
    compare_layer(tmp_path, gpu_device, "Deconvolution", data, [rand(rng, n, cin, h, w)], [(n, o, oh, ow)], blobs,
                  precision)


def pool_out(size, k, s, p, p_end, ceil):
    span = size + p + p_end - k
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and p > 0 and (out - 1) * s >= size + p:
        out -= 1
    return out


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("method,exclude", [("max", 0), ("avg", 0), ("avg", 1)])
@pytest.mark.parametrize("k,s,p,rounding", [(3, 2, 0, "ceil"), (3, 2, 1, "ceil"), (2, 2, 0, "floor"),
                                            (3, 1, 1, "ceil"), (5, 3, 2, "floor")])
def test_pooling(tmp_path, gpu_device, method, exclude, k, s, p, rounding, precision, style):
    rng = np.random.default_rng(k + s + p)
    n, c, h, w = 2, 3, 11, 8
    oh = pool_out(h, k, s, p, p, rounding == "ceil")
    ow = pool_out(w, k, s, p, p, rounding == "ceil")
    data = {"kernel": f"{k},{k}", "strides": f"{s},{s}", "pads_begin": f"{p},{p}", "pads_end": f"{p},{p}",
            "pool-method": method, "exclude-pad": "true" if exclude else "false", "rounding_type": rounding}
    compare_layer(tmp_path, gpu_device, "Pooling", data, [rand(rng, n, c, h, w)], [(n, c, oh, ow)],
                  precision=precision, style=style)


@pytest.mark.parametrize("method", ["max", "avg"])
def test_global_pooling(tmp_path, gpu_device, method):
    rng = np.random.default_rng(3)
    data = {"kernel": "7,5", "strides": "1,1", "pads_begin": "0,0", "pads_end": "0,0", "pool-method": method}
    compare_layer(tmp_path, gpu_device, "Pooling", data, [rand(rng, 3, 9, 7, 5)], [(3, 9, 1, 1)])


@pytest.mark.parametrize("style,config", KERNELS, ids=KERNEL_IDS)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape,axis", [((1, 37), 1), ((5, 3, 4, 3), 1), ((7, 9), 1), ((2, 3, 5), 2), ((3, 16), 1)])
def test_fully_connected(tmp_path, gpu_device, shape, axis, precision, style, config):
    rng = np.random.default_rng(len(shape))
    out = 19
    size = int(np.prod(shape[axis:]))
    compare_layer(tmp_path, gpu_device, "FullyConnected", {"out-size": out, "axis": axis}, [rand(rng, *shape)],
                  [tuple(shape[:axis]) + (out,)], {"weights": rand(rng, out, size), "biases": rand(rng, out)}, precision,
                  style=style, config=config)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("region,size", [("across", 5), ("across", 3), ("same", 3), ("same", 5)])
def test_norm(tmp_path, gpu_device, region, size, precision, style):
    rng = np.random.default_rng(size)
    x = rand(rng, 2, 7, 5, 9, scale=3.0)
    data = {"alpha": 0.3, "beta": 0.75, "local-size": size, "region": region, "k": 2.0}
    compare_layer(tmp_path, gpu_device, "Norm", data, [x], [x.shape], precision=precision, style=style)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("layer_type", ["SoftMax", "LogSoftmax"])
@pytest.mark.parametrize("shape,axis", [((3, 10), 1), ((2, 5, 3, 7), 1), ((2, 5, 3, 7), 2), ((4, 6, 9), -1),
                                        ((3, 1001), 1), ((2, 3, 67), 2)])
def test_softmax(tmp_path, gpu_device, shape, axis, precision, style, layer_type):
    """The last two: rows of 64 values or more (a work group reduces each one). LogSoftmax: the same kernels, the
    log of the sum taken instead of the division (scaled so that the SoftMax would underflow: finite still)."""
    rng = np.random.default_rng(len(shape))
    x = rand(rng, *shape, scale=4.0 if layer_type == "SoftMax" else 40.0)
    _, plan = compare_layer(tmp_path, gpu_device, layer_type, {"axis": axis}, [x], [x.shape], precision=precision,
                            style=style)
    rows = shape[-1] >= 64 and axis in (len(shape) - 1, -1)
    launch = plan.create_request().actions[0][1]
    assert launch.function_name == ("softmax_rows" if rows else "softmax")


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("across_spatial", [0, 1])
@pytest.mark.parametrize("channel_shared", [0, 1])
def test_normalize(tmp_path, gpu_device, across_spatial, channel_shared, precision):
    rng = np.random.default_rng(across_spatial * 2 + channel_shared)
    x = rand(rng, 2, 11, 13, 7)
    scale = rand(rng, 1 if channel_shared else 11)
    data = {"across_spatial": across_spatial, "channel_shared": channel_shared, "eps": 1e-10}
    compare_layer(tmp_path, gpu_device, "Normalize", data, [x], [x.shape], {"weights": scale}, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("operation,coeff,n_inputs", [("sum", None, 2), ("sum", "0.5,-2,3", 3), ("mul", None, 3),
                                                      ("max", None, 2), ("sum", "2.5", 1), ("max", None, 1)])
def test_eltwise(tmp_path, gpu_device, operation, coeff, n_inputs, precision):
    rng = np.random.default_rng(n_inputs)
    inputs = [rand(rng, 2, 3, 5, 7) for _ in range(n_inputs)]
    data = {"operation": operation}
    if coeff:
        data["coeff"] = coeff
    compare_layer(tmp_path, gpu_device, "Eltwise", data, inputs, [inputs[0].shape], precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("axis", [0, 1, 2, 3])
def test_concat(tmp_path, gpu_device, axis, precision):
    rng = np.random.default_rng(axis)
    shapes = []
    for extra in (2, 3, 1):
        shape = [2, 3, 5, 7]
        shape[axis] = extra
        shapes.append(tuple(shape))
    out = list(shapes[0])
    out[axis] = 6
    compare_layer(tmp_path, gpu_device, "Concat", {"axis": axis}, [rand(rng, *s) for s in shapes], [tuple(out)],
                  precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("layer_type,axis,sizes", [("Split", 1, (2, 3, 1)), ("Slice", 2, (1, 4)),
                                                   ("Split", 3, (3, 3, 1)), ("Split", 0, (1, 1))])
def test_split(tmp_path, gpu_device, layer_type, axis, sizes, precision):
    rng = np.random.default_rng(axis)
    shape = [2, 6, 5, 7]
    shape[axis] = sum(sizes)
    outs = []
    for size in sizes:
        part = list(shape)
        part[axis] = size
        outs.append(tuple(part))
    compare_layer(tmp_path, gpu_device, layer_type, {"axis": axis}, [rand(rng, *shape)], outs, precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("form", [1, 2, 3])
def test_crop(tmp_path, gpu_device, form, precision):
    rng = np.random.default_rng(form)
    x = rand(rng, 2, 5, 9, 11)
    if form == 1:
        inputs, data, out = [x, rand(rng, 2, 5, 4, 6)], {"axis": "2,3", "offset": "3,1"}, (2, 5, 4, 6)
    elif form == 2:
        inputs, data, out = [x], {"axis": "1,3", "offset": "1,2", "dim": "3,7"}, (2, 3, 9, 7)
    else:
        inputs, data, out = [x], {"axis": "2", "crop_begin": "2", "crop_end": "3"}, (2, 5, 4, 11)
    compare_layer(tmp_path, gpu_device, "Crop", data, inputs, [out], precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape,order", [((2, 5, 3, 7), (0, 2, 3, 1)), ((2, 5, 3, 7), (0, 3, 1, 2)),
                                         ((3, 4, 5), (2, 0, 1)), ((2, 3, 4, 5, 6), (0, 4, 2, 1, 3))])
def test_permute(tmp_path, gpu_device, shape, order, precision):
    rng = np.random.default_rng(len(shape))
    out = tuple(shape[a] for a in order)
    compare_layer(tmp_path, gpu_device, "Permute", {"order": ",".join(map(str, order))}, [rand(rng, *shape)], [out],
                  precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("layer_type,data,blobs", [
    ("ReLU", {}, None),
    ("ReLU", {"negative_slope": 0.2}, None),
    ("Clamp", {"min": -0.5, "max": 1.5}, None),
    ("Activation", {"type": "sigmoid"}, None),
    ("Activation", {"type": "tanh"}, None),
    ("Activation", {"type": "elu", "alpha": 0.7}, None),
    ("Activation", {"type": "abs"}, None),
    ("Activation", {"type": "relu6"}, None),
    ("Activation", {"type": "relu", "negative_slope": 0.1}, None),
    ("Activation", {"type": "erf"}, None),
    ("Activation", {"type": "gelu"}, None),
    ("Activation", {"type": "gelu", "approximation_mode": "tanh"}, None),
    ("PReLU", {}, "per_channel"),
    ("PReLU", {"channel_shared": 1}, "shared"),
    ("Power", {"power": 2, "scale": 0.5, "shift": 1}, None),
    ("Power", {"power": 0.5, "scale": 0.2, "shift": 9}, None),
    ("Power", {"power": -1, "scale": 0.3, "shift": 5}, None),
    ("Power", {"power": 3, "scale": -1.5, "shift": 0.2}, None),
    ("Power", {"power": 1.7, "scale": 0.2, "shift": 10}, None),
], ids=lambda v: str(v) if not isinstance(v, dict) else ",".join(f"{k}={x}" for k, x in v.items()))
def test_activations(tmp_path, gpu_device, layer_type, data, blobs, precision):
    rng = np.random.default_rng(5)
    x = rand(rng, 2, 5, 3, 9, scale=3.0)
    blob = None
    if blobs:
        blob = {"weights": rand(rng, 1 if blobs == "shared" else 5)}
    compare_layer(tmp_path, gpu_device, layer_type, data, [x], [x.shape], blob, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("blobs", ["weights", "biases", "both", "single"])
def test_scale_shift(tmp_path, gpu_device, blobs, precision):
    rng = np.random.default_rng(11)
    x = rand(rng, 3, 7, 4, 5)
    c = 1 if blobs == "single" else 7
    values = {}
    if blobs in ("weights", "both", "single"):
        values["weights"] = rand(rng, c)
    if blobs in ("biases", "both", "single"):
        values["biases"] = rand(rng, c)
    compare_layer(tmp_path, gpu_device, "ScaleShift", {}, [x], [x.shape], values, precision)


def test_scale_shift_on_a_2d_input(tmp_path, gpu_device):
    rng = np.random.default_rng(12)
    x = rand(rng, 4, 9)
    compare_layer(tmp_path, gpu_device, "ScaleShift", {}, [x], [x.shape],
                  {"weights": rand(rng, 9), "biases": rand(rng, 9)})


@pytest.mark.parametrize("precision", PRECISIONS)
def test_batch_normalization(tmp_path, gpu_device, precision):
    rng = np.random.default_rng(13)
    x = rand(rng, 2, 6, 5, 3)
    blobs = {"mean": rand(rng, 6), "variance": rng.uniform(0.5, 2, 6).astype(np.float32), "gamma": rand(rng, 6),
             "beta": rand(rng, 6)}
    compare_layer(tmp_path, gpu_device, "BatchNormalization", {"epsilon": 1e-3}, [x], [x.shape], blobs, precision)


@pytest.mark.parametrize("layer_type,data,shape", [
    ("Reshape", {"dim": "0,-1,5"}, (2, 12, 5)),
    ("Flatten", {"axis": 1}, (2, 60)),
])
def test_views(tmp_path, gpu_device, layer_type, data, shape):
    rng = np.random.default_rng(14)
    out, plan = compare_layer(tmp_path, gpu_device, layer_type, data, [rand(rng, 2, 3, 4, 5)], [shape])
    assert plan._groups.find(plan.steps[0].out_slots[0]) == plan._groups.find(plan.steps[0].in_slots[0])


@pytest.mark.parametrize("layer_type,data", [
    ("PriorBox", {"min_size": "4", "max_size": "9", "aspect_ratio": "2,3", "flip": 1, "clip": 1,
                  "variance": "0.1,0.1,0.2,0.2", "offset": 0.5}),
    ("PriorBoxClustered", {"width": "2,5.5", "height": "3,1.5", "variance": "0.1", "step": 8, "offset": 0.5}),
])
def test_prior_boxes_are_device_constants(tmp_path, gpu_device, layer_type, data):
    rng = np.random.default_rng(15)
    feature, image = rand(rng, 1, 4, 3, 5), rand(rng, 1, 3, 24, 40)
    priors = 6 if layer_type == "PriorBox" else 2
    _, plan = compare_layer(tmp_path, gpu_device, layer_type, data, [feature, image], [(1, 2, 3 * 5 * priors * 4)])
    assert plan.steps[0].kernel.constant


@pytest.mark.parametrize("batch,keep_top_k", [(1, 5), (3, 5), (3, -1)])
def test_detection_output_runs_on_the_host_between_device_layers(tmp_path, gpu_device, monkeypatch, batch,
                                                                 keep_top_k):
    """With its selection in C (gcc is here), the images of a batch on host threads
    (keep_top_k > 0: each image's rows are cut alone; threads whatever this
    machine's CPU count)."""
    from device_daemons.gpu.kernels import detection
    monkeypatch.setattr(detection, "MIN_CPUS", 1)
    rng = np.random.default_rng(16)
    priors, classes = 12, 3
    loc = rand(rng, batch, priors * 4, scale=0.1)
    conf = rng.uniform(0, 1, (batch, priors * classes)).astype(np.float32)
    centers = rng.uniform(0.2, 0.8, (priors, 2))
    boxes = np.concatenate([centers - 0.1, centers + 0.1], axis=1).ravel()
    prior = np.stack([boxes, np.full(boxes.size, 0.1)])[None].astype(np.float32)
    data = {"num_classes": classes, "share_location": 1, "background_label_id": 0, "nms_threshold": 0.45,
            "top_k": 10, "keep_top_k": keep_top_k, "code_type": "caffe.PriorBoxParameter.CENTER_SIZE",
            "confidence_threshold": 0.1}
    rows = batch * (keep_top_k if keep_top_k > 0 else 10)
    out, plan = compare_layer(tmp_path, gpu_device, "DetectionOutput", data, [loc, conf, prior], [(1, 1, rows, 7)])
    assert plan.steps[0].kernel.host and plan.steps[0].kernel.backend == "host native"
    images = out["layer"][0, 0, :, 0]
    assert set(images[images >= 0].astype(int)) == set(range(batch))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("a,b,data,out", [
    ((3, 5), (5, 7), {}, (3, 7)),
    ((2, 3, 4, 5), (2, 3, 5, 6), {}, (2, 3, 4, 6)),
    ((2, 3, 5, 4), (1, 1, 6, 5), {"transpose_a": "true", "transpose_b": "true"}, (2, 3, 4, 6)),
    ((1, 7, 9), (2, 9, 3), {}, (2, 7, 3)),
])
def test_matmul(tmp_path, gpu_device, a, b, data, out, precision):
    rng = np.random.default_rng(9)
    compare_layer(tmp_path, gpu_device, "MatMul", data, [rand(rng, *a), rand(rng, *b)], [out], precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape,axis,blobs", [((2, 5, 8), 2, "both"), ((2, 6, 3, 4), 1, "weights"),
                                              ((3, 7), 1, None), ((2, 4, 6), 1, "biases")])
def test_layer_norm(tmp_path, gpu_device, shape, axis, blobs, precision):
    rng = np.random.default_rng(13)
    size = shape[axis]
    values = {name: rand(rng, size) for name in ("weights", "biases") if blobs in (name, "both")}
    compare_layer(tmp_path, gpu_device, "LayerNorm", {"axis": axis, "eps": 1e-3}, [rand(rng, *shape, scale=3.0)],
                  [shape], values or None, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_select(tmp_path, gpu_device, precision):
    rng = np.random.default_rng(17)
    shape = (2, 3, 5, 4)
    cond = (rng.uniform(size=shape) > 0.5).astype(np.float32)
    compare_layer(tmp_path, gpu_device, "Select", {}, [cond, rand(rng, *shape), rand(rng, *shape)], [shape],
                  precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape,axis,tiles", [((2, 3, 1, 5), 2, 4), ((1, 4, 3), 0, 3), ((2, 1, 3, 1), 3, 7),
                                              ((3, 5), -1, 2)])
def test_tile(tmp_path, gpu_device, shape, axis, tiles, precision):
    rng = np.random.default_rng(19)
    out = list(shape)
    out[axis] *= tiles
    compare_layer(tmp_path, gpu_device, "Tile", {"axis": axis, "tiles": tiles}, [rand(rng, *shape)], [tuple(out)],
                  precision=precision)


@pytest.mark.parametrize("operation", ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"])
def test_eltwise_comparisons(tmp_path, gpu_device, operation):
    rng = np.random.default_rng(19)
    shape = (2, 3, 5, 4)
    a = rng.integers(-2, 2, shape).astype(np.float32)
    b = np.where(rng.uniform(size=shape) < 0.5, a, rng.integers(-2, 2, shape)).astype(np.float32)
    compare_layer(tmp_path, gpu_device, "Eltwise", {"operation": operation}, [a, b], [shape], precision="FP32")


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("dims,axis,ids", [((37, 5), 0, (2, 7)), ((3, 11, 4), 1, (5,)), ((6, 1, 9), 2, (1, 3, 2)),
                                           ((2049, 3), 0, (1, 13))])
def test_gather(tmp_path, gpu_device, dims, axis, ids, precision):
    """An embedding lookup: the dictionary's entries at integer indices (2048, FP16's largest exact index
    among every smaller integer, included)."""
    rng = np.random.default_rng(23)
    table = rand(rng, *dims)
    idx = rng.integers(0, dims[axis], ids).astype(np.float32)
    idx.flat[0] = dims[axis] - 1
    out = dims[:axis] + ids + dims[axis + 1:]
    compare_layer(tmp_path, gpu_device, "Gather", {"axis": axis, "dims": ",".join(map(str, dims))}, [idx], [out],
                  blobs={"weights": table}, precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("dims,axis,ids", [((37, 5), 0, (2, 7)), ((1, 11, 4), 1, (5,)), ((2, 1, 9), 2, (1, 3, 2))])
def test_gather_of_a_dictionary_input(tmp_path, gpu_device, dims, axis, ids, precision):
    """The two-input form: the dictionary is input 1 (the model's data), read from its buffer."""
    rng = np.random.default_rng(24)
    idx = rng.integers(0, dims[axis], ids).astype(np.float32)
    idx.flat[0] = dims[axis] - 1
    out = dims[:axis] + ids + dims[axis + 1:]
    compare_layer(tmp_path, gpu_device, "Gather", {"axis": axis}, [idx, rand(rng, *dims)], [out],
                  precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("layer_type", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("shape,axes,keep", [((2, 3, 5, 7), (1,), False), ((2, 3, 5, 7), (0, 2), True),
                                             ((1, 4, 9), (2,), False), ((3, 5), (0, 1), True),
                                             ((2, 3, 1, 7), (2, 3), True), ((2, 6, 4, 5), (-1, 1), False)])
def test_reductions(tmp_path, gpu_device, layer_type, shape, axes, keep, precision):
    """Any set of axes (one, several apart, all, a size-1 one, negative), kept or dropped, against the CPU
    kernel."""
    rng = np.random.default_rng(31)
    x = rand(rng, *shape)
    rank = len(shape)
    reduced = {a % rank for a in axes}
    out = tuple(1 if a in reduced else d for a, d in enumerate(shape)) if keep else tuple(
        d for a, d in enumerate(shape) if a not in reduced)
    compare_layer(tmp_path, gpu_device, layer_type, {"axes": ",".join(map(str, axes)), "keep_dims": int(keep)}, [x],
                  [out], precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape,axis,exclusive,reverse", [((2, 3, 5, 7), 1, False, False),
                                                          ((2, 3, 5, 7), 3, True, False),
                                                          ((1, 9, 4), -2, False, True), ((4, 6), 0, True, True)])
def test_cumsum(tmp_path, gpu_device, shape, axis, exclusive, reverse, precision):
    """The running sum along an axis, exclusive and reversed, against the CPU kernel."""
    x = rand(np.random.default_rng(32), *shape)
    compare_layer(tmp_path, gpu_device, "CumSum", {"axis": axis, "exclusive": int(exclusive), "reverse": int(reverse)},
                  [x], [shape], precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("ties", ["first", "last"])
@pytest.mark.parametrize("axis,out_max_val", [(1, False), (-1, True), (None, False), (None, True), (2, False)])
def test_argmax(tmp_path, gpu_device, axis, out_max_val, ties, precision):
    """top_k 1 along an axis or over each item, the index or the value (or both), ties (integer values) and NaN
    (a line with one, a line all NaN) as the CPU kernel has them."""
    x = np.random.default_rng(33).integers(-3, 3, (2, 4, 3, 5)).astype(np.float32)
    x[0, :, 0, 0] = np.nan
    x[1, 2, 1, 3] = np.nan
    x[1, 0, :, :] = np.nan if axis is None else x[1, 0, :, :]
    data = {"top_k": 1, "out_max_val": int(out_max_val), "ties": ties}
    if axis is None:
        out = (2, 2 if out_max_val else 1, 1, 1)
    else:
        data["axis"] = axis
        out = list(x.shape)
        out[axis] = 1
    from tests.cpu.cpu_helpers import single_layer_ir
    from tests.gpu.gpu_helpers import both_plans
    cpu, gpu = both_plans(single_layer_ir(tmp_path, "ArgMax", data, [x.shape], [tuple(out)], precision=precision),
                          gpu_device)
    assert gpu.warnings == []
    np.testing.assert_array_equal(gpu.infer({"in0": x})["layer"], cpu.infer({"in0": x})["layer"])  # (NaN too)


def test_argmax_of_more_than_one_is_left_to_another_device(tmp_path, gpu_device):
    from device_daemons.gpu.query import query_network
    from tests.cpu.cpu_helpers import single_layer_ir
    net = single_layer_ir(tmp_path, "ArgMax", {"top_k": 2, "axis": 1}, [(1, 4, 3)], [(1, 2, 3)])
    assert "layer" not in query_network(net)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("mode", ["constant", "reflect", "symmetric"])
@pytest.mark.parametrize("shape,begin,end", [((1, 3, 5, 6), (0, 0, 1, 2), (0, 0, 2, 1)),
                                             ((2, 4, 7), (1, 2, 0), (0, 1, 3)), ((3, 5), (2, 4), (2, 0))])
def test_pad(tmp_path, gpu_device, shape, begin, end, mode, precision):
    """Constant (a pad value), reflect and symmetric, up to the largest mirror each allows, against the CPU
    kernel."""
    x = rand(np.random.default_rng(34), *shape)
    out = tuple(d + b + e for d, b, e in zip(shape, begin, end))
    compare_layer(tmp_path, gpu_device, "Pad", {"pads_begin": ",".join(map(str, begin)),
                                                "pads_end": ",".join(map(str, end)), "pad_mode": mode,
                                                "pad_value": 1.5}, [x], [out], precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("layer_type,data,shape,out_hw", [
    ("Resample", {"type": "caffe.ResampleParameter.NEAREST", "factor": 2.0}, (1, 3, 4, 5), (8, 10)),
    ("Resample", {"type": "caffe.ResampleParameter.LINEAR", "height": 7, "width": 9}, (2, 2, 5, 4), (7, 9)),
    ("Resample", {"type": "caffe.ResampleParameter.LINEAR", "height": 3, "width": 2}, (1, 2, 7, 5), (3, 2)),
    ("Interp", {"zoom_factor": 2, "zoom_rule": "deeplab"}, (2, 3, 5, 7), (9, 13)),
    ("Interp", {"zoom_factor": 2, "pad_beg": -1, "pad_end": -1}, (1, 2, 7, 9), (10, 14)),
    ("Interp", {"height": 1, "width": 1}, (1, 2, 3, 3), (1, 1)),
    ("Interpolate", {"mode": "linear", "height": 10, "width": 9, "half_pixel_centers": 1}, (1, 3, 5, 7), (10, 9)),
    ("Interpolate", {"mode": "linear", "height": 9, "width": 13, "align_corners": 1}, (1, 3, 5, 7), (9, 13)),
    ("Interpolate", {"mode": "nearest", "height": 20, "width": 9, "align_corners": 1}, (1, 2, 18, 7), (20, 9)),
    ("Interpolate", {"mode": "nearest", "height": 13, "width": 16, "half_pixel_centers": 1}, (1, 2, 18, 7),
     (13, 16)),
    ("Interpolate", {"mode": "cubic", "height": 11, "width": 4, "half_pixel_centers": 1}, (2, 3, 5, 7), (11, 4)),
    ("Interpolate", {"mode": "cubic", "height": 9, "width": 13, "align_corners": 1}, (1, 2, 5, 7), (9, 13)),
    ("Interpolate", {"mode": "cubic", "height": 3, "width": 10}, (1, 2, 6, 7), (3, 10)),
], ids=lambda v: v if isinstance(v, str) else None)
def test_resizes(tmp_path, gpu_device, layer_type, data, shape, out_hw, precision):
    """Resample, Interp (its crop and zoom rules) and Interpolate (TensorFlow's corner and half-pixel rules),
    up and down, against the CPU kernel (the maps are the CPU kernel's own)."""
    x = rand(np.random.default_rng(35), *shape)
    compare_layer(tmp_path, gpu_device, layer_type, data, [x], [shape[:2] + out_hw], precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape,begin,stride,size", [((1, 6, 7, 8), (0, 1, 0, 7), (1, 2, 3, -1), (1, 3, 3, 8)),
                                                     ((2, 9), (1, 8), (1, -2), (1, 4)),
                                                     ((3, 4, 5), (0, 0, 0), (1, 1, 1), (3, 4, 5))])
def test_strided_slice(tmp_path, gpu_device, shape, begin, stride, size, precision):
    """Every stride-th element from begin, reversals (negative strides) and whole axes, against the CPU kernel."""
    x = rand(np.random.default_rng(36), *shape)
    compare_layer(tmp_path, gpu_device, "StridedSlice", {"begin": ",".join(map(str, begin)),
                                                         "stride": ",".join(map(str, stride)),
                                                         "size": ",".join(map(str, size))}, [x], [size],
                  precision=precision)


def test_transpose(tmp_path, gpu_device):
    """Transpose is Permute by another name."""
    x = rand(np.random.default_rng(37), 2, 3, 4, 5)
    compare_layer(tmp_path, gpu_device, "Transpose", {"order": "0,2,3,1"}, [x], [(2, 4, 5, 3)])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", [(2, 5, 3, 4), (1, 6)])
def test_grn(tmp_path, gpu_device, shape, precision):
    x = rand(np.random.default_rng(39), *shape)
    compare_layer(tmp_path, gpu_device, "GRN", {"bias": 0.5}, [x], [shape], precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("data,channels,out", [
    ({"coords": 4, "classes": 20, "num": 5, "do_softmax": 1}, 125, (1, 125 * 6 * 7)),             # YOLO v2
    ({"coords": 4, "classes": 80, "num": 9, "do_softmax": 0, "mask": "3,4,5"}, 255, (1, 255, 6, 7)),  # v3
])
def test_region_yolo(tmp_path, gpu_device, data, channels, out, precision):
    """Logistic x, y and objectness, the classes a softmax (v2, the output flattened) or logistic each (v3's
    masked regions), the other coords as they are, against the CPU kernel."""
    x = rand(np.random.default_rng(40), 1, channels, 6, 7, scale=3.0)
    compare_layer(tmp_path, gpu_device, "RegionYolo", data, [x], [out], precision=precision)


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_reorg_yolo(tmp_path, gpu_device, stride):
    x = rand(np.random.default_rng(41), 2, 3, 6, 12)
    compare_layer(tmp_path, gpu_device, "ReorgYolo", {"stride": stride}, [x],
                  [(2, 3 * stride * stride, 6 // stride, 12 // stride)])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("dims,axis,ids", [((2, 9, 4), 1, (2, 3)), ((3, 2, 7), 2, (3, 5)), ((2, 3, 6), 1, (2, 3, 2))])
def test_gather_with_batch_dims(tmp_path, gpu_device, dims, axis, ids, precision):
    """batch_dims 1: each batch's entries at its own indices, against the CPU kernel."""
    rng = np.random.default_rng(42)
    idx = rng.integers(0, dims[axis], ids).astype(np.float32)
    out = dims[:axis] + ids[1:] + dims[axis + 1:]
    compare_layer(tmp_path, gpu_device, "Gather", {"axis": axis, "batch_dims": 1}, [idx, rand(rng, *dims)], [out],
                  precision=precision)


def test_gather_gives_zero_at_no_index(tmp_path, gpu_device):
    """An index that is no integer in the dictionary's range reads 0 on the GPU, as TensorFlow's GPU kernel
    (the CPU plugin fails the request); the others are read as ever."""
    from device_daemons.gpu import GpuPlan
    from tests.cpu.cpu_helpers import single_layer_ir
    table = rand(np.random.default_rng(5), 7, 3)
    idx = np.array([[1, -1, 7, 2.5, np.nan, np.inf, 6, 1e10]], np.float32)
    plan = GpuPlan(single_layer_ir(tmp_path, "Gather", {"axis": 0, "dims": "7,3"}, [idx.shape], [(1, 8, 3)],
                                   {"weights": table}), gpu_device)
    got = plan.infer({"in0": idx})["layer"]
    want = np.zeros((1, 8, 3), np.float32)
    want[0, 0], want[0, 6] = table[1], table[6]
    np.testing.assert_array_equal(got, want)


def test_fp16_gather_of_a_large_dictionary_is_left_to_another_device(tmp_path, gpu_device):
    """FP16 storage has no exact index above 2048: query_network says so (HETERO runs it elsewhere) and the GPU
    plan alone refuses it, saying what to do."""
    from device_daemons.cpu import KernelError
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.query import query_network
    from tests.cpu.cpu_helpers import single_layer_ir
    table = rand(np.random.default_rng(6), 2050, 2)
    net = single_layer_ir(tmp_path, "Gather", {"axis": 0, "dims": "2050,2"}, [(1, 4)], [(1, 4, 2)],
                          {"weights": table}, "FP16")
    assert "layer" not in query_network(net)
    with pytest.raises(KernelError, match="FP16 storage holds no exact index above 2048.*INFERENCE_PRECISION_HINT"):
        GpuPlan(net, gpu_device)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("kind", ["exp", "log", "floor", "ceil", "round", "trunc", "softplus", "sign", "sin", "cos",
                                  "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log1p",
                                  "expm1", "softsign"])
def test_plain_function_activations(tmp_path, gpu_device, kind, precision):
    """Exp, Log (of positive values), Floor, Ceil, Round (halves to even) and trunc, halves and near-integers
    included, Sign (0 too), the trigonometric and hyperbolic functions and their inverses, Log1p, Expm1, each over
    its domain, Softsign, against the CPU kernel."""
    rng = np.random.default_rng(29)
    x = np.concatenate([np.arange(-6, 6) + 0.5, rng.standard_normal(33) * 4]).astype(np.float32).reshape(1, 3, 15)
    if kind == "softplus":
        x = x * 8  # (past both ends of its curve)
    if kind in ("exp", "log", "acosh", "log1p"):
        x = np.minimum(np.abs(x), 9.0) + (1.0 if kind == "acosh" else 0.125)  # (exp within FP16's range)
    if kind in ("asin", "acos", "atanh"):
        x = np.tanh(x * 0.5) * 0.98
    if kind in ("tan", "sinh", "cosh", "expm1"):
        x = np.clip(x, -1.5, 1.5) * (1.0 if kind == "tan" else 5.0)  # (off tan's poles; within FP16's range)
    if kind == "sign":
        x[0, 0, :2] = 0.0
    compare_layer(tmp_path, gpu_device, "Activation", {"type": kind}, [x], [x.shape], precision=precision)


@pytest.mark.parametrize("case", ["ctc_greedy_decoder_merge", "ctc_greedy_decoder_no_merge", "roi_pooling",
                                  "psroi_pooling"])
def test_host_computed_layers_equal_their_references(tmp_path, gpu_device, case):
    """ROIPooling, PSROIPooling and CTCGreedyDecoder in the GPU plan (run by the CPU kernel on the host between
    the device layers, no HETERO split): the CPU reference cases' independent references."""
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.query import query_network
    from tests.cpu.cpu_helpers import single_layer_ir
    from tests.cpu.test_cpu_reference_layers import REFERENCE_CASES
    ref = REFERENCE_CASES[case]()
    network = single_layer_ir(tmp_path, ref.layer_type, ref.data, [x.shape for x in ref.inputs], ref.out_shapes,
                              ref.blobs)
    assert "layer" in query_network(network)
    out = GpuPlan(network, gpu_device).infer({f"in{i}": x for i, x in enumerate(ref.inputs)})
    ref.check([out["layer"]] if len(ref.out_shapes) == 1 else
              [out[f"layer.{len(ref.inputs) + j}"] for j in range(len(ref.out_shapes))])


@pytest.mark.parametrize("layer_type", ["Proposal", "SimplerNMS"])
def test_region_proposals_in_the_gpu_plan(tmp_path, gpu_device, layer_type):
    """Proposal and SimplerNMS in the GPU plan (the CPU kernels on the host; tests/cpu holds them against OpenVINO
    and an independent reference), against the CPU plan. (FP32: half storage of the scores would reorder their
    near-ties, as any FP16 device's would.)"""
    rng = np.random.default_rng(5)
    a, h, w = 9, 5, 6
    scores = rng.uniform(0.01, 1.0, (1, 2 * a, h, w)).astype(np.float32)
    deltas = (rng.standard_normal((1, 4 * a, h, w)) * 0.3).astype(np.float32)
    info = np.array([[h * 16, w * 16, 1]], np.float32)
    if layer_type == "Proposal":
        data = {"base_size": 16, "feat_stride": 16, "min_size": 12, "ratio": "0.5,1,2", "scale": "1,2,4",
                "pre_nms_topn": 150, "post_nms_topn": 30, "nms_thresh": 0.6}
    else:
        data = {"cls_threshold": 0.5, "iou_threshold": 0.6, "min_bbox_size": 12, "feat_stride": 16,
                "pre_nms_topn": 150, "post_nms_topn": 30, "scale": "1,2,4"}
    out, _ = compare_layer(tmp_path, gpu_device, layer_type, data, [scores, deltas, info], [(30, 5)])
    assert np.count_nonzero(out["layer"][:, 3]) > 5  # real boxes


@pytest.mark.parametrize("levels,low,high,out_low,out_high", [(256, -2.5, 3.1, -2.5, 3.1), (15, -1.6, 2.4, -1.6, 2.4),
                                                                (4, 0.0, 1.0, -1.0, 1.0)])
def test_fake_quantize(tmp_path, gpu_device, levels, low, high, out_low, out_high):
    """FakeQuantize (TensorFlow's FakeQuant ops; the CPU kernel is held against TensorFlow in tests/tf) on an odd
    shape, values past both ends of the range included; FP32 (half storage of the input would move values across
    the rounding boundaries, as on any FP16 device)."""
    x = rand(np.random.default_rng(levels), 2, 5, 7, 3, scale=3.0)
    data = {"levels": levels, "input_low": low, "input_high": high, "output_low": out_low, "output_high": out_high}
    out, _ = compare_layer(tmp_path, gpu_device, "FakeQuantize", data, [x], [x.shape])
    assert len(np.unique(out["layer"])) <= levels


@pytest.mark.parametrize("operation", ["floor_div", "floor_mod"])
def test_floor_division(tmp_path, gpu_device, operation):
    """Eltwise floor_div / floor_mod (TensorFlow's FloorDiv / FloorMod; tests/tf holds the CPU against TensorFlow)
    on divisors of both signs and integer values; FP32 only: they jump at multiples of the divisor, where half
    storage moves values across (the TF graph floor_div_mod runs on the CPU and in IR v11, not on an FP16 GPU)."""
    rng = np.random.default_rng(9)
    a = np.concatenate([rng.standard_normal(40) * 4, np.arange(-10, 10)]).astype(np.float32).reshape(2, 3, 10)
    b = np.concatenate([rng.uniform(0.3, 2.0, 30) * rng.choice([-1, 1], 30), np.full(30, 7.0)]).astype(np.float32)
    out, _ = compare_layer(tmp_path, gpu_device, "Eltwise", {"operation": operation}, [a, b.reshape(2, 3, 10)],
                           [a.shape], rtol=1e-6)
    assert (out["layer"][1, 1:] != 0).any()
