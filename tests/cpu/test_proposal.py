"""Proposal as the reference runs it (py-faster-rcnn, the Inference Engine spec,
OpenVINO): the standard anchors against a numpy reference written from the spec,
the CPU kernel against the OpenVINO runtime's own Proposal op on the same inputs
(min_size scaled by the image info, each image's rows ending with batch index -1),
and the ROI poolings stopping at that end marker as OpenVINO's do."""
import numpy as np
import pytest

from ir.priors import proposal_anchors
from tests.cpu.cpu_helpers import run_single

F32 = {"INFERENCE_PRECISION_HINT": "f32"}


def spec_anchors(base_size, ratios, scales):
    """The anchors as the spec describes them: the base anchor is the square
    [0, 0, base-1, base-1]; for each ratio r, an anchor of the base's area with
    width round(sqrt(area / r)) and height round(width * r) (C rounding: halves away
    from zero) about the same centre; each of those is scaled by every scale; the
    corners are centre -/+ (side - 1) / 2."""
    ctr = (base_size - 1) / 2.0
    rows = []
    for r in ratios:
        w = np.floor(np.sqrt(base_size * base_size / r) + 0.5)
        h = np.floor(w * r + 0.5)
        for s in scales:
            half_w, half_h = (w * s - 1) / 2.0, (h * s - 1) / 2.0
            rows.append([ctr - half_w, ctr - half_h, ctr + half_w, ctr + half_h])
    return np.array(rows)


@pytest.mark.parametrize("base, ratios, scales", [
    (16, [0.5, 1, 2], [8, 16, 32]),          # Faster R-CNN's
    (16, [2.669], [4, 8, 16, 32]),           # a person detector's ratio that does not round to itself
    (8, [1], [2, 4, 8]),
    (18, [0.5, 0.333, 3.7], [1.5, 3]),       # 25 * 0.5 = 12.5: C rounds it up (numpy's round would not)
])
def test_standard_anchors_equal_the_spec(base, ratios, scales):
    np.testing.assert_array_equal(proposal_anchors(base, ratios, scales), spec_anchors(base, ratios, scales))


def test_anchor_sides_of_the_reported_detector():
    """The issue's R-FCN: base 16, ratio 2.669, scales 4..32: 40x108 .. 320x864 pixels."""
    a = proposal_anchors(16, [2.669], [4, 8, 16, 32])
    sides = np.stack([a[:, 2] - a[:, 0] + 1, a[:, 3] - a[:, 1] + 1], axis=1)
    np.testing.assert_array_equal(sides, [[40, 108], [80, 216], [160, 432], [320, 864]])


def openvino_proposal(attrs, scores, deltas, info):
    """The OpenVINO runtime's Proposal-4 (framework caffe) on the same inputs."""
    import openvino as ov
    import openvino.opset4 as ops
    params = [ops.parameter(scores.shape, np.float32), ops.parameter(deltas.shape, np.float32),
              ops.parameter(info.shape, np.float32)]
    op = ops.proposal(*params, {
        "base_size": np.uint32(attrs["base_size"]), "pre_nms_topn": np.uint32(attrs["pre_nms_topn"]),
        "post_nms_topn": np.uint32(attrs["post_nms_topn"]), "nms_thresh": np.float32(attrs["nms_thresh"]),
        "feat_stride": np.uint32(attrs["feat_stride"]), "min_size": np.uint32(attrs["min_size"]),
        "ratio": np.array(attrs["ratio"], np.float32), "scale": np.array(attrs["scale"], np.float32),
        "framework": "", "clip_before_nms": True, "clip_after_nms": False, "normalize": False,
        "box_size_scale": np.float32(1), "box_coordinate_scale": np.float32(1)})
    compiled = ov.Core().compile_model(ov.Model([op.output(0)], params), "CPU", F32)
    return compiled([scores, deltas, info])[compiled.outputs[0]]


def ir_data(attrs):
    return {k: ",".join(str(x) for x in v) if isinstance(v, list) else v for k, v in attrs.items()}


ATTRS = {"base_size": 16, "feat_stride": 16, "min_size": 12, "ratio": [0.5, 1, 2.669], "scale": [1, 2, 4],
         "pre_nms_topn": 150, "post_nms_topn": 60, "nms_thresh": 0.6}


@pytest.mark.parametrize("info", [[96, 128, 1.0], [96, 128, 1.6], [96, 128, 0.8, 2.2]],
                         ids=["scale1", "scale_h", "scale_h_and_w"])
@pytest.mark.parametrize("batch", [1, 2])
def test_proposal_equals_openvino(tmp_path, info, batch):
    a = 9
    h, w = 6, 8
    rng = np.random.default_rng(7 + batch)
    scores = rng.uniform(0.01, 1.0, (batch, 2 * a, h, w)).astype(np.float32)
    deltas = (rng.standard_normal((batch, 4 * a, h, w)) * 0.3).astype(np.float32)
    image = np.array([info], np.float32)
    (ours,), _ = run_single(tmp_path, "Proposal", ir_data(ATTRS), [scores, deltas, image],
                            [(batch * ATTRS["post_nms_topn"], 5)])
    ref = openvino_proposal(ATTRS, scores, deltas, image.reshape(-1))
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-3)
    rows = ours.reshape(batch, ATTRS["post_nms_topn"], 5)
    for i in range(batch):
        end = np.flatnonzero(rows[i, :, 0] == -1)
        kept = int(end[0]) if end.size else ATTRS["post_nms_topn"]
        assert 5 < kept, "the case must keep real ROIs"
        assert np.all(rows[i, :kept, 0] == i)
        if end.size:  # the end marker, then zeros
            assert np.all(rows[i, kept, 1:] == 0) and np.all(rows[i, kept + 1:] == 0)


def test_min_size_scales_with_the_image_info(tmp_path):
    """Boxes narrower than min_size * im_info[3] (or lower than min_size * im_info[2])
    get score 0: a larger scale keeps fewer distinct proposals."""
    a = 9
    rng = np.random.default_rng(1)
    scores = rng.uniform(0.01, 1.0, (1, 2 * a, 5, 5)).astype(np.float32)
    deltas = (rng.standard_normal((1, 4 * a, 5, 5)) * 0.3).astype(np.float32)
    attrs = dict(ATTRS, min_size=16, ratio=[0.5, 1, 2], scale=[0.5, 1, 2], nms_thresh=0.95, post_nms_topn=225)
    counts = []
    for scale in (0.5, 4.0):
        (rois,), _ = run_single(tmp_path, "Proposal", ir_data(attrs), [scores, deltas,
                                np.array([[80, 80, scale]], np.float32)], [(225, 5)])
        big = (rois[:, 3] - rois[:, 1] + 1 >= 16 * scale) & (rois[:, 4] - rois[:, 2] + 1 >= 16 * scale)
        real = rois[:, 0] == 0
        counts.append(int((real & big).sum()))
    assert counts[1] < counts[0]


def openvino_psroi(feat, rois, output_dim, group_size, scale):
    import openvino as ov
    import openvino.opset1 as ops
    params = [ops.parameter(feat.shape, np.float32), ops.parameter(rois.shape, np.float32)]
    op = ops.psroi_pooling(*params, output_dim, group_size, scale, 1, 1, "average")
    compiled = ov.Core().compile_model(ov.Model([op], params), "CPU", F32)
    return compiled([feat, rois])[compiled.outputs[0]]


def openvino_roi_pooling(feat, rois, pooled, scale):
    import openvino as ov
    import openvino.opset2 as ops
    params = [ops.parameter(feat.shape, np.float32), ops.parameter(rois.shape, np.float32)]
    op = ops.roi_pooling(*params, output_roi=list(pooled), spatial_scale=scale, method="max")
    compiled = ov.Core().compile_model(ov.Model([op], params), "CPU", F32)
    return compiled([feat, rois])[compiled.outputs[0]]


def proposal_like_rois():
    """Six real ROIs, the end marker, then zero rows (a Proposal's output)."""
    rng = np.random.default_rng(5)
    rois = np.zeros((10, 5), np.float32)
    xy = rng.uniform(0, 40, (6, 2))
    rois[:6, 1:3] = xy
    rois[:6, 3:5] = xy + rng.uniform(8, 30, (6, 2))
    rois[6, 0] = -1
    return rois


def test_psroi_pooling_stops_at_the_end_marker(tmp_path):
    rng = np.random.default_rng(2)
    feat = rng.standard_normal((1, 3 * 9, 12, 16)).astype(np.float32)
    rois = proposal_like_rois()
    (ours,), _ = run_single(tmp_path, "PSROIPooling", {"output_dim": 3, "group_size": 3, "spatial_scale": 0.25,
                                                       "mode": "average"}, [feat, rois], [(10, 3, 3, 3)])
    np.testing.assert_allclose(ours, openvino_psroi(feat, rois, 3, 3, 0.25), rtol=1e-5, atol=1e-5)
    assert np.all(ours[6:] == 0) and np.any(ours[:6] != 0)


def test_roi_pooling_stops_at_the_end_marker(tmp_path):
    rng = np.random.default_rng(4)
    feat = rng.standard_normal((1, 4, 12, 16)).astype(np.float32)
    rois = proposal_like_rois()
    (ours,), _ = run_single(tmp_path, "ROIPooling", {"pooled_h": 2, "pooled_w": 3, "spatial_scale": 0.25,
                                                     "method": "max"}, [feat, rois], [(10, 4, 2, 3)])
    np.testing.assert_allclose(ours, openvino_roi_pooling(feat, rois, (2, 3), 0.25), rtol=1e-5, atol=1e-5)
    assert np.all(ours[6:] == 0)
