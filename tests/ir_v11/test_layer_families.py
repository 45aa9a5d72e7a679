"""Every mapping from our layer types to opset ops, one small net a case: the IR
v11 compiled by the real OpenVINO runtime (f32) equals pycaffe's forward within
1e-4 of max |reference|. The cases are the CPU daemon's pycaffe cases, so both
back ends are held to the same nets."""
from __future__ import annotations

import numpy as np
import pytest

from tests.cpu.test_cpu_caffe_layers import ARGMAX, CASES, PRIOR_BOX, SSD_HEAD, conv, one
from tests.ir_v11.v11_helpers import assert_close, v11_case


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_layer_matches_pycaffe(ov_core, tmp_path, case):
    name, layers, inputs, compare, opts = case
    c = v11_case(ov_core, tmp_path, layers, inputs)
    if "input_scale" in opts:
        c.inputs = {k: v * opts["input_scale"] for k, v in c.inputs.items()}
    ours, ref = c.outputs()
    for key, blob in compare:
        assert key in ours, f"OpenVINO outputs {sorted(ours)} have no {key!r}"
        assert_close(ours[key], ref[blob], 1e-4, f"{name} {key}")


@pytest.mark.parametrize("params,shape", [a[1:] for a in ARGMAX], ids=[a[0] for a in ARGMAX])
def test_argmax_matches_pycaffe(ov_core, tmp_path, params, shape):
    c = v11_case(ov_core, tmp_path, one("ArgMax", params), {"data": shape})
    ours, ref = c.outputs()
    np.testing.assert_array_equal(ours["t"], ref["out"])


@pytest.mark.parametrize("fusing", [True, False], ids=["fusing", "no_fusing"])
def test_batchnorm_scale_matches_pycaffe(ov_core, tmp_path, fusing):
    layers = (conv("conv", "data", "c", "num_output: 6 kernel_size: 3 pad: 1")
              + 'layer { name: "bn" type: "BatchNorm" bottom: "c" top: "c" '
                'batch_norm_param { use_global_stats: true eps: 0.001 } }\n'
              + 'layer { name: "sc" type: "Scale" bottom: "c" top: "c" scale_param { bias_term: true } }\n'
              + 'layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }\n'
              + 'layer { name: "bn2" type: "BatchNorm" bottom: "data" top: "d" '
                'batch_norm_param { use_global_stats: true } }\n'
              + 'layer { name: "sc2" type: "Scale" bottom: "d" top: "d" scale_param { bias_term: true } }\n'
              + conv("conv2", "d", "e", "num_output: 4 kernel_size: 1"))
    c = v11_case(ov_core, tmp_path, layers, {"data": (2, 3, 6, 5)}, positive=("bn", "bn2"),
                 disable_fusing=not fusing)
    assert ("ScaleShift" in [layer.type for layer in c.network.layers]) != fusing
    ours, ref = c.outputs()
    assert_close(ours["relu"], ref["c"], 1e-4, "conv+bn+scale+relu")
    assert_close(ours["conv2"], ref["e"], 1e-4, "bn+scale+conv")


@pytest.mark.parametrize("params", [p[1] for p in PRIOR_BOX], ids=[p[0] for p in PRIOR_BOX])
def test_priorbox_matches_pycaffe(ov_core, tmp_path, params):
    layers = ('layer { name: "t" type: "PriorBox" bottom: "feat" bottom: "data" top: "out" '
              f'prior_box_param {{ {params} }} }}\n')
    c = v11_case(ov_core, tmp_path, layers, {"feat": (1, 2, 4, 5), "data": (1, 3, 32, 30)})
    ours, ref = c.outputs()
    assert_close(ours["t"], ref["out"], 1e-5, "priorbox")


@pytest.mark.parametrize("batch,scale,threshold", [(1, 0.3, 0.2), (2, 0.3, 0.2), (2, 0.1, 0.5)],
                         ids=["b1_keep_top_k_cut", "b2_keep_top_k_cut", "b2_padded"])
def test_ssd_head_matches_pycaffe(ov_core, tmp_path, batch, scale, threshold):
    head = SSD_HEAD.replace("confidence_threshold: 0.2", f"confidence_threshold: {threshold}")
    c = v11_case(ov_core, tmp_path, head, {"data": (batch, 3, 32, 32)}, scale=scale)
    ours, ref = c.outputs()
    det, want = ours["det"], ref["det"]
    assert det.shape == (1, 1, batch * 40, 7)
    kept = want.shape[2]
    assert 5 < kept <= batch * 40, kept  # the case must exercise NMS with real detections
    assert_close(det[:, :, :kept], want, 1e-4, "detections")
    if kept < batch * 40:
        assert det[0, 0, kept, 0] == -1  # the end of the detections


def test_proposal_matches_pycaffe(ov_core, tmp_path):
    h = w = 6
    a = 9
    rng = np.random.default_rng(3)
    scores = rng.uniform(0.01, 1.0, (1, 2 * a, h, w)).astype(np.float32)
    deltas = (rng.standard_normal((1, 4 * a, h, w)) * 0.2).astype(np.float32)
    info = np.array([[h * 16, w * 16, 1.0]], np.float32)
    layers = ('layer { name: "t" type: "Proposal" bottom: "cls" bottom: "bbox" bottom: "info" top: "rois" '
              'proposal_param { feat_stride: 16 base_size: 16 min_size: 4 ratio: 0.5 ratio: 1 ratio: 2 '
              'scale: 2 scale: 4 scale: 8 pre_nms_topn: 200 post_nms_topn: 40 nms_thresh: 0.6 } }\n')
    c = v11_case(ov_core, tmp_path, layers, {"cls": scores.shape, "bbox": deltas.shape, "info": info.shape},
                 input_values={"cls": scores, "bbox": deltas, "info": info})
    ours, ref = c.outputs()
    rois, want = ours["t"], ref["rois"]
    assert rois.shape == (40, 5)
    n = want.shape[0]
    assert 10 < n <= 40
    assert_close(rois[:n], want, 1e-4, "rois")


def test_fcn_deconv_crop_matches_pycaffe(ov_core, tmp_path):
    layers = (conv("score", "data", "score", "num_output: 4 kernel_size: 3 stride: 2")
              + conv("up", "score", "up", "num_output: 4 kernel_size: 4 stride: 2 bias_term: false",
                     kind="Deconvolution")
              + 'layer { name: "crop" type: "Crop" bottom: "up" bottom: "data" top: "out" '
                'crop_param { axis: 2 offset: 1 } }\n')
    c = v11_case(ov_core, tmp_path, layers, {"data": (1, 3, 17, 15)})
    ours, ref = c.outputs()
    assert_close(ours["crop"], ref["out"], 1e-4, "crop")
