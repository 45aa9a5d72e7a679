"""ROIPooling method=bilinear (the OD API's CropAndResize) against TensorFlow's own
tf.image.crop_and_resize, run in a subprocess (TensorFlow never loads into the test
process) on the same seeded maps and boxes: a map small next to the output (the
matrix-product path, Faster R-CNN's 4x5 crops to 14x14) and a larger one (the
gather path), boxes reaching outside the map (zeros there) and 1-pixel sides."""
from __future__ import annotations

import os
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


def channels_last(feat, rois, count, ph, pw, batch_index):
    """native.roi_bilinear_nhwc with roi_bilinear's arguments and result (NCHW)."""
    out = np.full((len(rois), ph, pw, feat.shape[1]), np.nan, np.float32)  # (every value must be written)
    batch = np.array([batch_index(rois[r, 0], len(feat)) for r in range(count)], np.int64)
    native.roi_bilinear_nhwc(np.ascontiguousarray(feat.transpose(0, 2, 3, 1)), rois, count, batch, out)
    return out.transpose(0, 3, 1, 2)


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
    # numpy's, the C one on NCHW arrays and the C one channels last (the oneDNN backend's)
    for impl in (roi_bilinear, native.roi_bilinear, channels_last):
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


def crop_then_pool_ir(tmp_path, rois: int, pool: dict):
    """in0 -> 1x1 Convolution (a oneDNN tensor) -> ROIPooling bilinear (ROIs: in1) ->
    Pooling `pool`: Faster R-CNN's second stage entry."""
    from ir import Edge, Layer, Network, Port, read_ir, write_ir
    rng = np.random.default_rng(3)
    c, mid, h, w, ph, pw = 5, 24, 4, 5, 6, 4
    conv = {"kernel-x": "1", "kernel-y": "1", "output": str(mid), "group": "1"}
    roi = {"pooled_h": str(ph), "pooled_w": str(pw), "spatial_scale": "1", "method": "bilinear"}
    k, s = int(pool["kernel-x"]), int(pool["stride-x"])
    pooled = (rois, mid, (ph - k) // s + 1, (pw - k) // s + 1)
    layers = [Layer(0, "map", "Input", outputs=[Port(0, (1, c, h, w))]),
              Layer(1, "rois", "Input", outputs=[Port(0, (rois, 5))]),
              Layer(2, "conv", "Convolution", data=conv, inputs=[Port(0, (1, c, h, w))],
                    outputs=[Port(1, (1, mid, h, w))],
                    blobs={"weights": rng.standard_normal(mid * c).astype(np.float32),
                           "biases": rng.standard_normal(mid).astype(np.float32)}),
              Layer(3, "crop", "ROIPooling", data=roi, inputs=[Port(0, (1, mid, h, w)), Port(1, (rois, 5))],
                    outputs=[Port(2, (rois, mid, ph, pw))]),
              Layer(4, "pool", "Pooling", data=pool, inputs=[Port(0, (rois, mid, ph, pw))], outputs=[Port(1, pooled)])]
    edges = [Edge(0, 0, 2, 0), Edge(2, 1, 3, 0), Edge(1, 0, 3, 1), Edge(3, 2, 4, 0)]
    xml = os.path.join(str(tmp_path), "crop_pool.xml")
    write_ir(Network("crop_pool", layers, edges), xml)
    return read_ir(xml)


MAX_2X2 = {"kernel-x": "2", "kernel-y": "2", "stride-x": "2", "stride-y": "2", "pool-method": "max",
           "rounding_type": "floor"}
POOLS = {"max 2x2 (taken in)": MAX_2X2,
         "max 3x3 stride 1": dict(MAX_2X2, **{"kernel-x": "3", "kernel-y": "3", "stride-x": "1", "stride-y": "1"}),
         "avg 2x2": dict(MAX_2X2, **{"pool-method": "avg", "exclude-pad": "true"})}


@pytest.mark.parametrize("precision", ["f32", "bf16"])
@pytest.mark.parametrize("pool", sorted(POOLS))
def test_the_onednn_backend_crops_channels_last_between_its_layers(tmp_path, precision, pool):
    """The crop reads the convolution's output channels last (f32; reordered only where
    the convolution wrote another layout or type) and writes channels last; a max
    pooling of kernel = stride is computed in the same C call (no pooling step, the
    crops never in memory), any other pooling reads the crops as they are (no reorder
    between them); nothing on numpy; the result is the numpy backend's, end-marker rows
    zero."""
    from device_daemons.cpu import ExecutionPlan
    network = crop_then_pool_ir(tmp_path, 4, POOLS[pool])
    plan = ExecutionPlan(network, backend="onednn", precision=precision)
    steps = plan.program.steps
    names = [s.name for s in steps]
    crop = names.index("crop")
    assert steps[crop].backend == "native" and steps[crop].precision == "f32"
    taken_in = pool.endswith("(taken in)")
    assert ("pool" not in names) == taken_in, names
    assert (("pool", "crop") in [(layer.name, host) for layer, host in plan.program.fused]) == taken_in
    if not taken_in:
        assert steps[crop + 1].name == "pool" and steps[crop + 1].backend == "onednn"
    assert all(s.backend in ("onednn", "native") and "to_numpy" not in s.name for s in steps), names
    reorders = [s.note for s in steps if s.type == "Reorder" and "crop" in s.note]
    assert all("ROIPooling crop reads acdb f32" in note for note in reorders), reorders  # (bf16: the conv's type)
    rng = np.random.default_rng(4)
    feat = rng.standard_normal((1, 5, 4, 5)).astype(np.float32)
    rois = np.array([[0, 0.1, 0.2, 0.9, 0.7], [0, -0.2, 0.3, 0.5, 1.2], [0, 0.4, 0.4, 0.4, 0.6],
                     [-1, 0, 0, 0, 0]], np.float32)
    got = plan.infer({"map": feat, "rois": rois})["pool"]
    want = ExecutionPlan(network, backend="numpy").infer({"map": feat, "rois": rois})["pool"]
    assert got.shape == want.shape and (got[3] == 0).all()
    # (the convolutions differ in their last bits, in bf16 by its rounding)
    assert np.abs(got - want).max() <= (1e-5 if precision == "f32" else 2e-2) * np.abs(want).max()
    bad = rois.copy()
    bad[1, 0] = 1  # a batch index beyond the batch of 1: the numpy kernel's error, not a crash
    with pytest.raises(Exception, match="ROI batch index 1 is out of range for a batch of 1"):
        plan.infer({"map": feat, "rois": bad})


def test_the_pooled_crop_is_the_crop_then_its_max_pooling():
    """The C call with a pooling taken in gives exactly the crop's C result max-pooled
    (odd crop sizes: the floor drops the last row and column; samples off the map)."""
    rng = np.random.default_rng(9)
    feat = rng.standard_normal((2, 7, 9, 16)).astype(np.float32)  # (n, h, w, c)
    rois = np.array([[1, -0.3, 0.1, 0.6, 1.3], [0, 0.2, 0.2, 0.9, 0.8], [0, 0.5, 0.5, 0.5, 0.5],
                     [-1, 0, 0, 0, 0]], np.float32)
    batch = np.array([1, 0, 0], np.int64)
    for ph, pw, kh, kw in ((14, 14, 2, 2), (7, 5, 2, 2), (6, 9, 3, 3), (4, 6, 1, 2)):
        crops = np.full((4, ph, pw, 16), np.nan, np.float32)
        native.roi_bilinear_nhwc(feat, rois, 3, batch, crops)
        oh, ow = ph // kh, pw // kw
        want = crops[:, :oh * kh, :ow * kw].reshape(4, oh, kh, ow, kw, 16).max(axis=(2, 4))
        got = np.full((4, oh, ow, 16), np.nan, np.float32)
        native.roi_bilinear_nhwc(feat, rois, 3, batch, got, (ph, pw), (kh, kw))
        assert np.array_equal(got, want), (ph, pw, kh, kw)
