"""ROIPooling method=bilinear (the OD API's CropAndResize) against TensorFlow's own
tf.image.crop_and_resize, run in a subprocess (TensorFlow never loads into the test
process) on the same seeded maps and boxes: a map small next to the output (the
matrix-product path, Faster R-CNN's 4x5 crops to 14x14) and a larger one (the
gather path), boxes reaching outside the map (zeros there) and 1-pixel sides."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from device_daemons.cpu.kernels.roi_pooling import roi_bilinear
from device_daemons.cpu.native import roi_bilinear as native

CASES = [(576, 4, 5, 14, 14), (8, 1, 1, 3, 3), (64, 38, 50, 14, 14), (16, 7, 9, 2, 5), (16, 7, 9, 1, 1)]

TF_SCRIPT = """
    import os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np
    import tensorflow as tf
    d = sys.argv[1]
    feat, boxes, index = (np.load(os.path.join(d, n + ".npy")) for n in ("feat", "boxes", "index"))
    size = tuple(int(v) for v in sys.argv[2:4])
    out = tf.image.crop_and_resize(feat.transpose(0, 2, 3, 1), boxes, index, size, extrapolation_value=0)
    np.save(os.path.join(d, "ref.npy"), out.numpy().transpose(0, 3, 1, 2))
"""


@pytest.mark.parametrize("c,h,w,ph,pw", CASES)
def test_bilinear_roi_pooling_equals_tensorflow_crop_and_resize(tmp_path, c, h, w, ph, pw):
    rng = np.random.default_rng(c + h + w)
    feat = rng.standard_normal((2, c, h, w)).astype(np.float32)
    n = 12
    y1, x1 = rng.uniform(-0.2, 0.9, n), rng.uniform(-0.2, 0.9, n)
    y2, x2 = y1 + rng.uniform(0, 0.6, n), x1 + rng.uniform(0, 0.6, n)
    y2[0], x2[1] = y1[0], x1[1]  # a side of one pixel
    index = rng.integers(0, 2, n).astype(np.int32)
    boxes = np.stack([y1, x1, y2, x2], 1).astype(np.float32)
    for name, value in (("feat", feat), ("boxes", boxes), ("index", index)):
        np.save(tmp_path / (name + ".npy"), value)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(TF_SCRIPT), str(tmp_path), str(ph), str(pw)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ref = np.load(tmp_path / "ref.npy")
    rois = np.concatenate([index[:, None].astype(np.float32), boxes[:, [1, 0, 3, 2]]], 1)
    rois = np.concatenate([rois, np.full((2, 5), -1, np.float32)])  # the end marker, then a row after it
    native.load()
    for impl in (roi_bilinear, native.roi_bilinear):  # numpy's, and the C one the fast backend runs
        ours = impl(feat, rois, n, ph, pw, lambda v, _n: int(v))
        assert ours.shape == (n + 2, c, ph, pw) and (ours[n:] == 0).all(), impl.__module__
        ours = ours[:n]
        # TensorFlow places the samples in float32, we in float64: 1e-5 of the map's range
        assert np.abs(ours - ref).max() <= 1e-5 * np.abs(feat).max(), (impl.__module__, np.abs(ours - ref).max())
        if min(h, w, ph, pw) > 1:  # a corner sample outside the map is zero (TensorFlow's extrapolation_value)
            assert (ours[[i for i in range(n) if y1[i] < 0 or x1[i] < 0]][..., 0, 0] == 0).all()


def test_the_fast_backend_runs_the_bilinear_method_in_c(tmp_path):
    from tests.cpu.cpu_helpers import single_layer_ir
    from device_daemons.cpu import ExecutionPlan
    for method, backend in (("bilinear", "native"), ("max", "numpy")):
        network = single_layer_ir(tmp_path, "ROIPooling", {"pooled_h": 3, "pooled_w": 2, "spatial_scale": 1,
                                                           "method": method},
                                  [(1, 4, 5, 6), (2, 5)], [(2, 4, 3, 2)], name=f"roi_{method}")
        plan = ExecutionPlan(network, backend="onednn", precision="f32")
        (step,) = [s for s in plan.program.steps if s.type == "ROIPooling"]
        assert step.backend == backend
        feat = np.random.default_rng(0).standard_normal((1, 4, 5, 6)).astype(np.float32)
        rois = np.array([[0, 0.1, 0.2, 0.9, 0.7], [0, 1, 1, 4, 3]], np.float32)
        got = next(iter(plan.infer({"in0": feat, "in1": rois}).values()))
        want = next(iter(ExecutionPlan(network, backend="numpy").infer({"in0": feat, "in1": rois}).values()))
        assert np.array_equal(got, want), method
