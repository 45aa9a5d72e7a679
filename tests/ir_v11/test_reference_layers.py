"""Layers pycaffe does not have, as hand-built IR v2 networks written as IR v11 and
run by OpenVINO: the CPU daemon's reference cases (one-layer IRs with outputs from
independent references: plain-loop numpy versions of the catalog's semantics,
OpenCV's resize), plus the mappings only IR v11 has (cubic Resample) and the
stateful Memory pair."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from tests.cpu.cpu_helpers import single_layer_ir
from tests.cpu.test_cpu_reference_layers import REFERENCE_CASES, memory_net, rand, resample_case
from tests.ir_v11.v11_helpers import assert_close, compile_v11

V11_CASES = {
    **REFERENCE_CASES,
    "resample_cubic_x2": lambda: resample_case("caffe.ResampleParameter.CUBIC", cv2.INTER_CUBIC, (10, 14),
                                               {"factor": 2}),
    "resample_cubic_size": lambda: resample_case("caffe.ResampleParameter.CUBIC", cv2.INTER_CUBIC, (13, 9),
                                                 {"factor": 0, "height": 13, "width": 9}),
}


def run_v11(core, tmp_path, layer_type, data, inputs, out_shapes, blobs=None):
    network = single_layer_ir(tmp_path, layer_type, data, [x.shape for x in inputs], out_shapes, blobs)
    result = compile_v11(core, network, tmp_path).infer({f"in{i}": x for i, x in enumerate(inputs)})
    if len(out_shapes) == 1:
        return [result["layer"]]
    return [result[f"layer.{len(inputs) + j}"] for j in range(len(out_shapes))]


@pytest.mark.parametrize("name", list(V11_CASES))
def test_layer_matches_reference(ov_core, tmp_path, name):
    case = V11_CASES[name]()
    case.check(run_v11(ov_core, tmp_path, case.layer_type, case.data, case.inputs, case.out_shapes, case.blobs))


@pytest.mark.parametrize("names", [("mean", "variance"), ("biases", "weights")], ids=["named", "legacy_names"])
def test_batch_normalization(ov_core, tmp_path, names):
    x = rand(2, 4, 3, 3)
    mean, var = rand(4), np.abs(rand(4)) + 0.5
    (out,) = run_v11(ov_core, tmp_path, "BatchNormalization", {"epsilon": 0.002}, [x], [x.shape],
                     blobs={names[0]: mean, names[1]: var})
    ref = (x - mean.reshape(1, 4, 1, 1)) / np.sqrt(var.reshape(1, 4, 1, 1) + 0.002)
    assert_close(out, ref, 1e-5, "BatchNormalization")


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


@pytest.mark.parametrize("drop", [True, False], ids=["drop_empty", "keep_empty"])
def test_detection_output_drops_boxes_left_empty_by_the_clip(ov_core, tmp_path, drop):
    """drop_empty_boxes on OpenVINO (whose DetectionOutput keeps them): twice the rows, the empty
    ones sorted after, the best keep_top_k of the rest - the CPU kernel's rows (best score first)."""
    from tests.cpu.test_cpu_nms import empty_box_case
    attrs, inputs, kept = empty_box_case(drop)
    (rows,) = run_v11(ov_core, tmp_path, "DetectionOutput", attrs, inputs, [(1, 1, 2, 7)])
    want = kept if drop else [[0, 1, 0.9, 0.1, 0, 0.4, 0], [0, 1, 0.85, 0.3, 0.3, 0.3, 0.6]]
    np.testing.assert_allclose(rows[0, 0], want, atol=1e-7)


def test_detection_output_drops_empty_boxes_of_many_classes(ov_core, tmp_path):
    """A random head of 5 classes with a third of its boxes outside the image: OpenVINO's rows
    (best score first) are the CPU kernel's (label by label), the same set, then the end marker."""
    from device_daemons.cpu.kernels import KERNELS
    from ir import Layer, Port
    rng = np.random.default_rng(3)
    priors, classes = 60, 5
    xy = rng.random((priors, 2)) * 1.5 - 0.5
    prior = np.concatenate([np.concatenate([xy, xy + 0.05 + rng.random((priors, 2)) * 0.3], 1).ravel(),
                            np.tile([0.1, 0.1, 0.2, 0.2], priors)]).astype(np.float32).reshape(1, 2, -1)
    loc = (rng.standard_normal((1, priors * 4)) * 0.5).astype(np.float32)
    conf = rng.random((1, priors * classes)).astype(np.float32)
    attrs = {"num_classes": classes, "share_location": 1, "background_label_id": 0, "nms_threshold": 0.5,
             "top_k": -1, "code_type": "caffe.PriorBoxParameter.CENTER_SIZE", "keep_top_k": 40,
             "confidence_threshold": 0.3, "clip_after_nms": 1, "drop_empty_boxes": 1}
    inputs = [loc, conf, prior]
    layer = Layer(1, "det", "DetectionOutput", data={k: str(v) for k, v in attrs.items()},
                  inputs=[Port(i, x.shape) for i, x in enumerate(inputs)], outputs=[Port(3, (1, 1, 40, 7))])
    (want,) = KERNELS["DetectionOutput"](layer).forward(inputs)
    (got,) = run_v11(ov_core, tmp_path, "DetectionOutput", attrs, inputs, [(1, 1, 40, 7)])

    def detections(rows):
        rows = rows[0, 0]
        end = np.flatnonzero(rows[:, 0] < 0)
        rows = rows[:end[0] if end.size else len(rows)]
        return rows[np.lexsort((rows[:, 2], rows[:, 1]))]
    ours = detections(want)
    assert 20 <= len(ours) <= 40, len(ours)
    np.testing.assert_allclose(detections(got), ours, atol=1e-6)
    attrs["drop_empty_boxes"] = 0  # (the head has empty boxes among its best: else this test tests nothing)
    layer.data["drop_empty_boxes"] = "0"
    (kept_all,) = KERNELS["DetectionOutput"](layer).forward(inputs)
    rows = detections(kept_all)
    assert ((rows[:, 5] - rows[:, 3]) * (rows[:, 6] - rows[:, 4]) <= 0).sum() >= 3
