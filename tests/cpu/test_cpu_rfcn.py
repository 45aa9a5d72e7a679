"""R-FCN-style detectors: DetectionOutput with normalized: false, input_width and
input_height, whose priors are the Proposal's ROIs reshaped to [1, 1, R*5]
(5 values a prior: [batch, x1, y1, x2, y2] in pixels). An R-FCN-like head the test
builds (RPN -> Proposal -> PSROIPooling -> average -> DetectionOutput with ROI
priors) converts and runs; its detections equal the OpenVINO runtime's own
DetectionOutput fed with the same inputs (the reference this form comes from), and
the whole head, with an anchor ratio that does not round to itself, equals the
OpenVINO 2024.6 runtime running mo 2024.6's conversion of the same model."""
import json
import os
import subprocess

import numpy as np
import pytest

from core.errors import Error
from tests.caffe_models import make_caffemodel
from tests.cpu.cpu_helpers import convert_to_plan
from tests.support import convert_api, write_text

H, W, CLASSES, ROIS = 96, 128, 3, 20
HEAD = """name: "rfcn_head"
input: "data"
input_shape {{ dim: 1 dim: 3 dim: {h} dim: {w} }}
input: "im_info"
input_shape {{ dim: 1 dim: 3 }}
layer {{ name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param {{ num_output: 16 kernel_size: 8 stride: 8 }} }}
layer {{ name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }}
layer {{ name: "rpn_cls_score" type: "Convolution" bottom: "conv1" top: "rpn_cls_score"
  convolution_param {{ num_output: {rpn_cls} kernel_size: 1 }} }}
layer {{ name: "rpn_bbox_pred" type: "Convolution" bottom: "conv1" top: "rpn_bbox_pred"
  convolution_param {{ num_output: {rpn_loc} kernel_size: 1 }} }}
layer {{ name: "rpn_cls_score_reshape" type: "Reshape" bottom: "rpn_cls_score" top: "rpn_cls_score_reshape"
  reshape_param {{ shape {{ dim: 0 dim: 2 dim: -1 dim: 0 }} }} }}
layer {{ name: "rpn_cls_prob" type: "Softmax" bottom: "rpn_cls_score_reshape" top: "rpn_cls_prob" }}
layer {{ name: "rpn_cls_prob_reshape" type: "Reshape" bottom: "rpn_cls_prob" top: "rpn_cls_prob_reshape"
  reshape_param {{ shape {{ dim: 0 dim: {rpn_cls} dim: -1 dim: 0 }} }} }}
layer {{ name: "proposal" type: "Proposal" bottom: "rpn_cls_prob_reshape" bottom: "rpn_bbox_pred" bottom: "im_info"
  top: "rois" proposal_param {{ feat_stride: 8 base_size: 8 min_size: 4 {anchors}
  pre_nms_topn: 200 post_nms_topn: {rois} nms_thresh: 0.7 }} }}
layer {{ name: "rfcn_cls" type: "Convolution" bottom: "conv1" top: "rfcn_cls"
  convolution_param {{ num_output: {cls_maps} kernel_size: 1 }} }}
layer {{ name: "rfcn_bbox" type: "Convolution" bottom: "conv1" top: "rfcn_bbox"
  convolution_param {{ num_output: {loc_maps} kernel_size: 1 }} }}
layer {{ name: "psroipooled_cls_rois" type: "PSROIPooling" bottom: "rfcn_cls" bottom: "rois"
  top: "psroipooled_cls_rois" psroi_pooling_param {{ spatial_scale: 0.125 output_dim: {classes} group_size: 3 }} }}
layer {{ name: "ave_cls_score_rois" type: "Pooling" bottom: "psroipooled_cls_rois" top: "cls_score"
  pooling_param {{ pool: AVE kernel_size: 3 stride: 3 }} }}
layer {{ name: "psroipooled_loc_rois" type: "PSROIPooling" bottom: "rfcn_bbox" bottom: "rois"
  top: "psroipooled_loc_rois" psroi_pooling_param {{ spatial_scale: 0.125 output_dim: {loc} group_size: 3 }} }}
layer {{ name: "ave_bbox_pred_rois" type: "Pooling" bottom: "psroipooled_loc_rois" top: "bbox_pred"
  pooling_param {{ pool: AVE kernel_size: 3 stride: 3 }} }}
layer {{ name: "cls_prob" type: "Softmax" bottom: "cls_score" top: "cls_prob" }}
layer {{ name: "cls_prob_reshape" type: "Reshape" bottom: "cls_prob" top: "cls_prob_reshape"
  reshape_param {{ shape {{ dim: 1 dim: -1 }} }} }}
layer {{ name: "bbox_pred_reshape" type: "Reshape" bottom: "bbox_pred" top: "bbox_pred_reshape"
  reshape_param {{ shape {{ dim: 1 dim: -1 }} }} }}
layer {{ name: "rois_reshape" type: "Reshape" bottom: "rois" top: "rois_reshape"
  reshape_param {{ shape {{ dim: 1 dim: 1 dim: -1 }} }} }}
layer {{ name: "detection_out" type: "DetectionOutput" bottom: "bbox_pred_reshape" bottom: "cls_prob_reshape"
  bottom: "rois_reshape" top: "detection_out"
  detection_output_param {{ num_classes: {classes} share_location: false background_label_id: 0
    nms_param {{ nms_threshold: 0.3 top_k: {rois} }} code_type: CENTER_SIZE keep_top_k: 30
    confidence_threshold: 0.2 {extra} }} }}
"""
ROI_PRIORS = "variance_encoded_in_target: true normalized: false input_width: {} input_height: {}".format(W, H)


SQUARE = (1,), (2, 4, 8)


def head(tmp_path, extra=ROI_PRIORS, anchors=SQUARE):
    ratios, scales = anchors
    a = len(ratios) * len(scales)
    proto = write_text(str(tmp_path / "head.prototxt"), HEAD.format(
        h=H, w=W, rois=ROIS, classes=CLASSES, loc=4 * CLASSES, cls_maps=9 * CLASSES, loc_maps=36 * CLASSES,
        extra=extra, rpn_cls=2 * a, rpn_loc=4 * a,
        anchors=" ".join([f"ratio: {r}" for r in ratios] + [f"scale: {s}" for s in scales])))
    weights = str(tmp_path / "head.caffemodel")
    make_caffemodel(proto, weights, scale=None)
    return proto, weights


def openvino_detection_output(loc, conf, priors, keep_top_k):
    """The OpenVINO runtime's DetectionOutput (opset1) on the same three inputs."""
    import openvino as ov
    import openvino.opset1 as ops
    f32 = np.float32
    attrs = {"num_classes": CLASSES, "background_label_id": 0, "top_k": ROIS, "variance_encoded_in_target": True,
             "keep_top_k": [keep_top_k], "code_type": "caffe.PriorBoxParameter.CENTER_SIZE",
             "share_location": False, "nms_threshold": f32(0.3), "confidence_threshold": f32(0.2),
             "clip_after_nms": False, "clip_before_nms": False, "decrease_label_id": False, "normalized": False,
             "input_height": H, "input_width": W, "objectness_score": f32(0)}
    params = [ops.parameter(a.shape, np.float32) for a in (loc, conf, priors)]
    model = ov.Model([ops.detection_output(*params, attrs)], params)
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([loc, conf, priors])[compiled.outputs[0]]


def detections(out):
    """Rows before the first image_id -1 (the end marker)."""
    rows = out.reshape(-1, 7)
    end = np.flatnonzero(rows[:, 0] == -1)
    return rows[:end[0] if end.size else len(rows)]


def assert_same_head_detections(infer, reference, rounds: int, at_least: int):
    """Two engines' detections (`infer`, `reference`: feeds -> outputs) of the head on `rounds` random images: the
    same rows within 1e-4, more than `at_least` of them in all."""
    rng = np.random.default_rng(3)
    found = 0
    for _ in range(rounds):
        feeds = {"data": rng.standard_normal((1, 3, H, W)).astype(np.float32),
                 "im_info": np.array([[H, W, 1]], np.float32)}
        ours, ref = detections(infer(feeds)["detection_out"]), detections(reference(feeds)["detection_out"])
        assert ours.shape == ref.shape
        np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-4)
        found += len(ours)
    assert found > at_least


def test_rfcn_head_with_roi_priors_equals_openvino(tmp_path):
    proto, weights = head(tmp_path)
    inputs = ["bbox_pred_reshape", "cls_prob_reshape", "rois_reshape"]
    plan, network = convert_to_plan(proto, weights, tmp_path, extra_outputs=inputs)
    det = network.layer_by_name("detection_out")
    assert det.data["normalized"] == "0" and det.data["input_width"] == str(W) and det.data["input_height"] == str(H)
    assert [p.dims for p in det.inputs] == [(1, ROIS * CLASSES * 4), (1, ROIS * CLASSES), (1, 1, ROIS * 5)]
    rng = np.random.default_rng(3)
    found = 0
    for _ in range(3):
        x = rng.standard_normal((1, 3, H, W)).astype(np.float32)
        out = plan.infer({"data": x, "im_info": np.array([[H, W, 1]], np.float32)})
        loc, conf, priors = (out[name] for name in inputs)
        assert np.any(priors.reshape(-1, 5)[:, 3] > 0)  # real ROIs, not padding
        ours, ref = detections(out["detection_out"]), detections(openvino_detection_output(loc, conf, priors, 30))
        assert ours.shape == ref.shape
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)
        found += len(ours)
    assert found > 10  # the comparison covered real detections (labels 1 and 2, pixel ROIs)


def test_the_reported_roi_prior_shapes_convert(tmp_path):
    """The issue's report: 200 ROIs, 2 classes, 8 location values a ROI: 1600 location
    values and 1000 prior values were refused as '1600 do not match 250 priors'."""
    proto, weights = head(tmp_path)
    text = open(proto).read().replace("post_nms_topn: 20", "post_nms_topn: 200").replace("top_k: 20", "top_k: 200")
    text = text.replace("output_dim: 3", "output_dim: 2").replace("output_dim: 12", "output_dim: 8")
    text = text.replace("num_output: 27", "num_output: 18").replace("num_output: 108", "num_output: 72")
    text = text.replace("num_classes: 3", "num_classes: 2")
    proto = write_text(str(tmp_path / "reported.prototxt"), text)
    make_caffemodel(proto, weights, scale=None)
    det = convert_api(input_model=weights, input_proto=proto).layer_by_name("detection_out")
    assert [p.dims for p in det.inputs] == [(1, 1600), (1, 400), (1, 1, 1000)]


@pytest.mark.parametrize("extra, needle", [
    ("variance_encoded_in_target: true normalized: false", "no positive input_width and input_height"),
    ("normalized: false input_width: 128 input_height: 96", "has no variances"),
    ("variance_encoded_in_target: true", "240 location values per image do not match 25 priors. They match 20 "
                                         "priors of 5 values: if the priors are ROIs"),
])
def test_roi_priors_with_missing_parameters_are_clear_errors(tmp_path, extra, needle):
    proto, weights = head(tmp_path, extra)
    with pytest.raises(Error, match=needle):
        convert_api(input_model=weights, input_proto=proto)


OV_2024_RUN = """
import json, sys
import numpy as np
import openvino as ov
xml, feeds, out = sys.argv[1:]
core = ov.Core()
compiled = core.compile_model(core.read_model(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
inputs = dict(np.load(feeds))
result = compiled({p.get_any_name(): inputs[p.get_any_name()] for p in compiled.inputs})
np.savez(out, **{p.get_any_name(): result[p] for p in compiled.outputs})
print(json.dumps({"version": ov.get_version()}))
"""


@pytest.mark.openvino_dev
def test_rfcn_head_with_unrounded_ratio_equals_openvino_2024_on_mos_ir(tmp_path):
    """The issue's R-FCN: a ratio (2.669) whose anchor sides must be rounded, image
    info with a scale (min_size * 1.3). mo 2024.6 converts the Caffe model, the
    OpenVINO 2024.6 runtime runs it; our converter + CPU plan on the same model and
    inputs give the same detections."""
    from benchmarks.references import openvino_mo, openvino_python
    proto, weights = head(tmp_path, anchors=((0.5, 2.669), (1, 2, 4)))
    mo_dir = tmp_path / "mo"
    subprocess.run([openvino_mo(), "--input_model", weights, "--input_proto", proto, "--output_dir", str(mo_dir),
                    "--model_name", "rfcn", "--compress_to_fp16=False", "--silent"], check=True, capture_output=True)
    plan, _ = convert_to_plan(proto, weights, tmp_path)
    rng = np.random.default_rng(11)
    found = 0
    for i in range(3):
        feeds = {"data": rng.standard_normal((1, 3, H, W)).astype(np.float32),
                 "im_info": np.array([[H, W, 1.3]], np.float32)}
        np.savez(tmp_path / "feeds.npz", **feeds)
        proc = subprocess.run([openvino_python(), "-c", OV_2024_RUN, str(mo_dir / "rfcn.xml"),
                               str(tmp_path / "feeds.npz"), str(tmp_path / "out.npz")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(proc.stdout.strip().splitlines()[-1])["version"].startswith("2024.6")
        theirs = dict(np.load(tmp_path / "out.npz"))
        ref = detections(theirs[next(k for k in theirs if "detection_out" in k)])
        ours = detections(plan.infer(feeds)["detection_out"])
        assert ours.shape == ref.shape, (ours.shape, ref.shape)
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)
        found += len(ours)
    assert found > 10  # real detections were compared
