"""Layers pycaffe does not have, as hand-built IR v2 networks written as IR v11 and
run by OpenVINO, against the independent references the CPU daemon's tests use
(plain-loop numpy versions of the catalog's semantics, OpenCV's resize)."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from tests.cpu.cpu_helpers import single_layer_ir
from tests.cpu.test_cpu_reference_layers import (
    ctc_ref, cv_resize, memory_net, prior_clustered_ref, psroi_ref, rand, region_yolo_ref, reorg_ref, roi_pool_ref,
)
from tests.ir_v11.v11_helpers import assert_close, compile_v11


def run_v11(core, tmp_path, layer_type, data, inputs, out_shapes, blobs=None):
    network = single_layer_ir(tmp_path, layer_type, data, [x.shape for x in inputs], out_shapes, blobs)
    run = compile_v11(core, network, tmp_path)
    result = run.infer({f"in{i}": x for i, x in enumerate(inputs)})
    if len(out_shapes) == 1:
        return [result["layer"]]
    return [result[f"layer.{len(inputs) + j}"] for j in range(len(out_shapes))]


@pytest.mark.parametrize("do_softmax", [1, 0], ids=["yolo_v2_softmax", "yolo_v3_mask"])
def test_region_yolo(ov_core, tmp_path, do_softmax):
    coords, classes, num = 4, 3, 3
    mask = [0, 2] if not do_softmax else []
    regions = num if do_softmax else len(mask)
    x = rand(2, regions * (coords + 1 + classes), 3, 4, scale=2.0)
    data = {"coords": coords, "classes": classes, "num": num, "do_softmax": do_softmax, "axis": 1, "end_axis": 3,
            "anchors": "1,2,3,4,5,6"}
    if mask:
        data["mask"] = ",".join(map(str, mask))
    out_shape = (2, x[0].size) if do_softmax else x.shape
    (out,) = run_v11(ov_core, tmp_path, "RegionYolo", data, [x], [out_shape])
    ref = region_yolo_ref(x, coords, classes, regions, do_softmax).reshape(out_shape)
    assert_close(out, ref, 1e-5, "RegionYolo")


def test_reorg_yolo(ov_core, tmp_path):
    x = rand(2, 3, 6, 4)
    (out,) = run_v11(ov_core, tmp_path, "ReorgYolo", {"stride": 2}, [x], [(2, 12, 3, 2)])
    np.testing.assert_array_equal(out, reorg_ref(x, 2))


@pytest.mark.parametrize("merge", [1, 0])
def test_ctc_greedy_decoder(ov_core, tmp_path, merge):
    t_len, n, c = 12, 3, 4
    rng = np.random.default_rng(merge)
    labels = rng.integers(0, c, (t_len, n))
    labels[1::3] = labels[0::3][:len(labels[1::3])]
    probs = rand(t_len, n, c, scale=0.1)
    probs[np.arange(t_len)[:, None], np.arange(n)[None, :], labels] += 1.0
    seq = np.ones((t_len, n), np.float32)
    seq[8:, 1] = 0
    seq[5:, 2] = 0
    (out,) = run_v11(ov_core, tmp_path, "CTCGreedyDecoder", {"ctc_merge_repeated": merge}, [probs, seq],
                     [(n, t_len, 1, 1)])
    np.testing.assert_array_equal(out, ctc_ref(probs, seq, merge))


def test_grn(ov_core, tmp_path):
    x = rand(2, 5, 3, 4)
    (out,) = run_v11(ov_core, tmp_path, "GRN", {"bias": 0.5}, [x], [x.shape])
    ref = x / np.sqrt(np.square(x.astype(np.float64)).sum(axis=1, keepdims=True) + 0.5)
    assert_close(out, ref, 1e-5, "GRN")


def test_clamp(ov_core, tmp_path):
    x = rand(2, 3, 4, 5, scale=3.0)
    (out,) = run_v11(ov_core, tmp_path, "Clamp", {"min": -1.5, "max": 2}, [x], [x.shape])
    np.testing.assert_array_equal(out, np.clip(x, -1.5, 2.0))


@pytest.mark.parametrize("names", [("mean", "variance"), ("biases", "weights")], ids=["named", "legacy_names"])
def test_batch_normalization(ov_core, tmp_path, names):
    x = rand(2, 4, 3, 3)
    mean, var = rand(4), np.abs(rand(4)) + 0.5
    (out,) = run_v11(ov_core, tmp_path, "BatchNormalization", {"epsilon": 0.002}, [x], [x.shape],
                     blobs={names[0]: mean, names[1]: var})
    ref = (x - mean.reshape(1, 4, 1, 1)) / np.sqrt(var.reshape(1, 4, 1, 1) + 0.002)
    assert_close(out, ref, 1e-5, "BatchNormalization")


@pytest.mark.parametrize("kind,interp,size,data", [
    ("caffe.ResampleParameter.NEAREST", cv2.INTER_NEAREST, (10, 14), {"factor": 2}),
    ("caffe.ResampleParameter.NEAREST", cv2.INTER_NEAREST, (7, 9), {"factor": 0, "height": 7, "width": 9}),
    ("caffe.ResampleParameter.LINEAR", cv2.INTER_LINEAR, (10, 14), {"factor": 2}),
    ("caffe.ResampleParameter.LINEAR", cv2.INTER_LINEAR, (13, 4), {"factor": 0, "height": 13, "width": 4}),
    ("caffe.ResampleParameter.CUBIC", cv2.INTER_CUBIC, (10, 14), {"factor": 2}),
    ("caffe.ResampleParameter.CUBIC", cv2.INTER_CUBIC, (13, 9), {"factor": 0, "height": 13, "width": 9}),
], ids=["nearest_x2", "nearest_size", "linear_x2", "linear_size", "cubic_x2", "cubic_size"])
def test_resample_matches_opencv(ov_core, tmp_path, kind, interp, size, data):
    x = rand(2, 3, 5, 7)
    (out,) = run_v11(ov_core, tmp_path, "Resample", dict(data, type=kind, antialias=0), [x], [(2, 3) + size])
    assert_close(out, cv_resize(x, size[0], size[1], interp), 1e-5, kind)


@pytest.mark.parametrize("data,step", [
    ({"width": "10,20.5,4", "height": "8,12,30", "clip": 0, "offset": 0.5,
      "variance": "0.1,0.1,0.2,0.2"}, None),
    ({"width": "30,6", "height": "14,40", "clip": 1, "offset": 0.25, "step": 7, "variance": "0.1"}, (7, 7)),
    ({"width": "9", "height": "5", "clip": 1, "offset": 0.5, "step_h": 6, "step_w": 5, "img_h": 40,
      "img_w": 36, "variance": "0.1,0.2,0.3,0.4"}, (6, 5)),
], ids=["from_image", "step_clip", "img_hw_step_hw"])
def test_prior_box_clustered(ov_core, tmp_path, data, step):
    feat, image = rand(1, 2, 4, 6), rand(1, 3, 32, 48)
    n = len(data["width"].split(","))
    (out,) = run_v11(ov_core, tmp_path, "PriorBoxClustered", data, [feat, image], [(1, 2, 4 * 6 * n * 4)])
    img_h, img_w = data.get("img_h", 32), data.get("img_w", 48)
    step = step or (img_h / 4, img_w / 6)
    variance = [float(v) for v in data["variance"].split(",")]
    ref = prior_clustered_ref(4, 6, img_h, img_w, [float(v) for v in data["width"].split(",")],
                              [float(v) for v in data["height"].split(",")], step, data["offset"], data["clip"],
                              variance * 4 if len(variance) == 1 else variance)
    assert_close(out, ref, 1e-6, "PriorBoxClustered")


def test_roi_pooling(ov_core, tmp_path):
    feat = rand(2, 3, 12, 10)
    rois = np.array([[0, 0, 0, 79, 95], [1, 10.4, 20, 40, 60], [0, 33, 5, 34, 6], [1, 60, 70, 200, 300],
                     [0, 2, 2, 17.5, 30]], np.float32)
    (out,) = run_v11(ov_core, tmp_path, "ROIPooling", {"pooled_h": 3, "pooled_w": 4, "spatial_scale": 0.125},
                     [feat, rois], [(5, 3, 3, 4)])
    assert_close(out, roi_pool_ref(feat, rois, 3, 4, 0.125), 1e-6, "ROIPooling")


def test_psroi_pooling(ov_core, tmp_path):
    od, g = 2, 3
    feat = rand(2, od * g * g, 9, 11)
    rois = np.array([[0, 0, 0, 60, 50], [1, 8, 16, 40, 70], [1, 30, 30, 31, 31], [0, 50, 40, 200, 100]],
                    np.float32)
    (out,) = run_v11(ov_core, tmp_path, "PSROIPooling", {"output_dim": od, "group_size": g, "spatial_scale": 0.125},
                     [feat, rois], [(4, od, g, g)])
    assert_close(out, psroi_ref(feat, rois, od, g, 0.125), 1e-5, "PSROIPooling")


def test_crop_second_and_third_forms(ov_core, tmp_path):
    x = rand(2, 3, 10, 9)
    (out,) = run_v11(ov_core, tmp_path, "Crop", {"axis": "2,3", "offset": "1,2", "dim": "6,5"}, [x], [(2, 3, 6, 5)])
    np.testing.assert_array_equal(out, x[:, :, 1:7, 2:7])
    (out,) = run_v11(ov_core, tmp_path, "Crop", {"axis": "1,3", "crop_begin": "1,3", "crop_end": "0,2"}, [x],
                     [(2, 2, 10, 4)])
    np.testing.assert_array_equal(out, x[:, 1:, :, 3:7])


def test_flatten_and_split_types(ov_core, tmp_path):
    x = rand(2, 3, 4, 5)
    (out,) = run_v11(ov_core, tmp_path, "Flatten", {"axis": 1, "end_axis": 2}, [x], [(2, 12, 5)])
    np.testing.assert_array_equal(out, x.reshape(2, 12, 5))
    outs = run_v11(ov_core, tmp_path, "Split", {"axis": 1}, [x], [(2, 1, 4, 5), (2, 2, 4, 5)])
    np.testing.assert_array_equal(outs[0], x[:, :1])
    np.testing.assert_array_equal(outs[1], x[:, 1:])


def test_memory_keeps_state_between_calls(ov_core, tmp_path):
    """The Memory pair as a ReadValue/Assign variable: out = 2 * (sum of the inputs
    so far), per infer request, back to zeros after reset_state()."""
    run = compile_v11(ov_core, memory_net(tmp_path), tmp_path)
    assert [op.type for op in run.model.ops if op.type in ("ReadValue", "Assign")] == ["ReadValue", "Assign"]
    request = run.compiled.create_infer_request()
    xs = [rand(1, 4) for _ in range(3)]
    total = np.zeros((1, 4), np.float32)
    for x in xs:
        total = total + x
        out = request.infer({"in0": x})
        np.testing.assert_allclose(out["out"], 2 * total, rtol=1e-6)
    request.reset_state()
    np.testing.assert_allclose(request.infer({"in0": xs[0]})["out"], 2 * xs[0], rtol=1e-6)
