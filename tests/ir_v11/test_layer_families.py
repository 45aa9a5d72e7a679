"""Every mapping from our layer types to opset ops, one small net a case: the IR
v11 compiled by the real OpenVINO runtime (f32) equals pycaffe's forward within
1e-4 of max |reference|. The cases are the CPU daemon's pycaffe cases, so both
back ends are held to the same nets."""
from __future__ import annotations

import numpy as np
import pytest

from tests.cpu.test_cpu_caffe_layers import (
    ARGMAX, BN_SCALE, BN_SCALE_INPUTS, BN_SCALE_POSITIVE, CASES, FCN_HEAD, PRIOR_BOX, PRIOR_BOX_INPUTS, PROPOSAL,
    SSD_HEAD_CASES, SSD_HEAD_IDS, check_batchnorm_scale, check_detections, one, prior_box_layer,
    proposal_inputs, ssd_head,
)
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
    c = v11_case(ov_core, tmp_path, BN_SCALE, BN_SCALE_INPUTS, positive=BN_SCALE_POSITIVE, disable_fusing=not fusing)
    assert ("ScaleShift" in [layer.type for layer in c.network.layers]) != fusing
    check_batchnorm_scale(*c.outputs())


@pytest.mark.parametrize("params", [p[1] for p in PRIOR_BOX], ids=[p[0] for p in PRIOR_BOX])
def test_priorbox_matches_pycaffe(ov_core, tmp_path, params):
    ours, ref = v11_case(ov_core, tmp_path, prior_box_layer(params), PRIOR_BOX_INPUTS).outputs()
    assert_close(ours["t"], ref["out"], 1e-5, "priorbox")


@pytest.mark.parametrize("batch,scale,threshold", SSD_HEAD_CASES, ids=SSD_HEAD_IDS)
def test_ssd_head_matches_pycaffe(ov_core, tmp_path, batch, scale, threshold):
    c = v11_case(ov_core, tmp_path, ssd_head(threshold), {"data": (batch, 3, 32, 32)}, scale=scale)
    ours, ref = c.outputs()
    check_detections(ours["det"], ref["det"], batch, threshold)


def test_proposal_equals_the_cpu_plan(ov_core, tmp_path):
    """Proposal-4 on OpenVINO (what our IR v11 writes) and the CPU kernel on the same
    converted layer (tests/cpu/test_proposal.py holds the kernel against OpenVINO's op)."""
    from device_daemons.cpu import ExecutionPlan
    values = proposal_inputs()
    c = v11_case(ov_core, tmp_path, PROPOSAL, {k: v.shape for k, v in values.items()}, input_values=values)
    ours, ref = c.run.infer(values)["t"], ExecutionPlan(c.network).infer(values)["t"]
    assert np.count_nonzero(ref[:, 0] == 0) > 10 and np.any(ref[:, 3] > 0)  # real ROIs
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-3)


def test_fcn_deconv_crop_matches_pycaffe(ov_core, tmp_path):
    ours, ref = v11_case(ov_core, tmp_path, FCN_HEAD, {"data": (1, 3, 17, 15)}).outputs()
    assert_close(ours["crop"], ref["out"], 1e-4, "crop")


RELU_ARGMAX = ('layer { name: "r" type: "ReLU" bottom: "data" top: "r" }\n'
               'layer { name: "t" type: "ArgMax" bottom: "r" top: "out" argmax_param { top_k: 2 axis: 1 } }\n'
               'layer { name: "u" type: "ArgMax" bottom: "r" top: "flat" argmax_param { top_k: 3 } }\n')


def test_argmax_ties_go_to_the_larger_index_as_in_caffe(ov_core, tmp_path):
    """After a ReLU many values are 0 at once: Caffe gives the larger index first among
    equal values, a stable TopK the smaller one (the mapping reverses the axis)."""
    c = v11_case(ov_core, tmp_path, RELU_ARGMAX, {"data": (2, 4, 6, 7)})
    ours, ref = c.outputs()
    assert (np.maximum(c.inputs["data"], 0).max(axis=1) == 0).any()  # (the case has ties)
    np.testing.assert_array_equal(ours["t"], ref["out"])
    np.testing.assert_array_equal(ours["u"], ref["flat"])
