"""DetectionOutput's NMS: nms_classes (all classes at once, overlaps a block of
ranks at a time) and the fast backend's C version (device_daemons/cpu/native/nms.c,
built here with the real compiler) give exactly what the sequential ApplyNMSFast rule
(nms_fast) gives, on random boxes, ties, degenerate boxes, every top_k form and
adaptive eta; and the SSD head with hundreds of candidates per class split over many
blocks against pycaffe, on both backends. The fast backend's whole DetectionOutput in C
(native/detection_output.c, which includes nms.c) gives the numpy kernel's rows."""
from __future__ import annotations

import numpy as np
import pytest

from device_daemons.cpu.kernels import detection
from device_daemons import native_build
from device_daemons.cpu.native import nms as native_nms
from device_daemons.native_build import NativeUnavailable
from tests.cpu.cpu_helpers import assert_close, caffe_case
from tests.cpu.test_cpu_caffe_layers import SSD_HEAD
from tests.support import assert_detection_padding


def random_case(rng, classes=None, priors=None):
    classes, priors = classes or int(rng.integers(1, 6)), priors or int(rng.integers(1, 300))
    shared = rng.random() < 0.5
    groups = 1 if shared else classes
    xy = rng.random((groups, priors, 2)).astype(np.float32)
    # some boxes have a negative width or height (size 0 in Caffe's overlap)
    wh = (rng.random((groups, priors, 2)) * rng.choice([0.05, 0.3, 1.0]) - 0.02).astype(np.float32)
    boxes = np.concatenate([xy, xy + wh], -1)
    scores = rng.random((classes, priors)).astype(np.float32)
    if rng.random() < 0.3:
        scores = np.round(scores * 5) / 5  # ties: the lower index ranks first
    return boxes, scores


@pytest.mark.parametrize("block", [8, 256, 1 << 17])
def test_nms_classes_is_the_sequential_rule(monkeypatch, block):
    monkeypatch.setattr(detection, "NMS_BLOCK_ELEMENTS", block)  # blocks of 8 ranks up to one block
    rng = np.random.default_rng(block)
    kept_total = 0
    for _ in range(150):
        boxes, scores = random_case(rng)
        threshold = float(rng.choice([0.0, 0.2, 0.5]))
        nms_threshold = float(rng.choice([-0.1, 0.0, 0.1, 0.45, 0.7]))
        top_k = int(rng.choice([-1, 0, 1, 10, 50, 400]))
        got = detection.nms_classes(boxes, scores, threshold, nms_threshold, top_k)
        assert len(got) == scores.shape[0]
        for c in range(scores.shape[0]):
            want = detection.nms_fast(boxes[c if boxes.shape[0] > 1 else 0], scores[c], threshold, nms_threshold,
                                      1.0, top_k)
            assert list(got[c]) == list(want)
            kept_total += len(want)
    assert kept_total > 1000  # the cases keep real detections


def test_nms_candidates_are_the_best_first_with_ties_by_index():
    scores = np.array([0.5, 0.9, 0.5, 0.1, 0.9, 0.5], np.float32)
    assert list(detection._candidates(scores, 0.2, -1)) == [1, 4, 0, 2, 5]
    assert list(detection._candidates(scores, 0.2, 3)) == [1, 4, 0]
    assert list(detection._candidates(scores, 0.2, 0)) == []
    assert list(detection._candidates(scores, 0.95, 2)) == []


SSD_MANY = SSD_HEAD.replace("top_k: 60", "top_k: 300").replace("keep_top_k: 40", "keep_top_k: 150")


def test_ssd_head_with_many_candidates_per_class_matches_pycaffe(tmp_path, monkeypatch, cpu_backend):
    """Hundreds of candidates per class, 16-rank blocks: the blocks' suppression of
    worse ranks (numpy backend), the C selection and NMS (oneDNN backend) against pycaffe."""
    monkeypatch.setattr(detection, "NMS_BLOCK_ELEMENTS", 16 * 2 * 300)
    c = caffe_case(tmp_path, SSD_MANY.replace("confidence_threshold: 0.2", "confidence_threshold: 0.01"),
                   {"data": (1, 3, 32, 32)}, scale=0.3)
    perf = []
    ours, ref = c.run()
    c.plan.infer(c.inputs, perf=perf)
    ran = {row.name: row.backend for row in perf}
    assert ran["det"] == ("native" if cpu_backend == "onednn" else "numpy")
    kept = ref["det"].shape[2]
    assert kept > 100
    assert ours["det"].shape == (1, 1, 150, 7)
    assert_close(ours["det"][:, :, :kept], ref["det"], 1e-4, "detections")
    assert_detection_padding(ours["det"], kept)


def test_native_nms_is_the_sequential_rule():
    """The C selection + NMS against nms_fast, eta 1 and adaptive eta < 1."""
    native_nms.load()  # built with the machine's compiler (the set-up installs gcc)
    rng = np.random.default_rng(7)
    kept_total = 0
    for _ in range(400):
        boxes, scores = random_case(rng)
        threshold = float(rng.choice([-1.0, 0.0, 0.2, 0.5]))
        nms_threshold = float(rng.choice([-0.1, 0.0, 0.1, 0.45, 0.7]))
        eta = float(rng.choice([1.0, 1.0, 0.9, 0.5]))
        top_k = int(rng.choice([-1, 0, 1, 10, 50, 400]))
        got = native_nms.nms_classes(boxes, scores, threshold, nms_threshold, eta, top_k)
        assert len(got) == scores.shape[0]
        for c in range(scores.shape[0]):
            want = detection.nms_fast(boxes[c if boxes.shape[0] > 1 else 0], scores[c], threshold, nms_threshold,
                                      eta, top_k)
            assert list(got[c]) == list(want), (threshold, nms_threshold, eta, top_k)
            kept_total += len(want)
    assert kept_total > 2000


def test_native_nms_shares_the_classes_out_over_openmp_threads():
    """Enough classes x priors for nms.c's parallel loop (PARALLEL_WORK): each class
    gets exactly nms_fast's result whatever the calling thread's team size (1, 2 or 3
    threads: the classes then fall to the threads differently)."""
    import ctypes
    native_nms.load()
    gomp = ctypes.CDLL("libgomp.so.1")  # (the runtime nms.c was linked with: the one loaded)
    rng = np.random.default_rng(11)
    before = gomp.omp_get_max_threads()
    try:
        for shared_scores in (False, True):
            boxes, scores = random_case(rng, classes=24, priors=1200)
            if shared_scores:
                scores = np.round(scores * 5) / 5  # ties
            want = [detection.nms_fast(boxes[c if boxes.shape[0] > 1 else 0], scores[c], 0.05, 0.45, 1.0, 200)
                    for c in range(24)]
            for threads in (1, 2, 3):
                gomp.omp_set_num_threads(threads)
                assert gomp.omp_get_max_threads() == threads
                got = native_nms.nms_classes(boxes, scores, 0.05, 0.45, 1.0, 200)
                assert [list(g) for g in got] == [list(w) for w in want], threads
    finally:
        gomp.omp_set_num_threads(before)


@pytest.mark.parametrize("top_k", [-1, 400, 2999, 3000, 5000])
def test_native_candidates_select_the_best_with_ties_by_index(top_k):
    """Thousands of candidates with many equal scores (the radix selection's boundary
    falls inside a run of ties: the lower indices are taken), -0 equal to +0, NaN
    never a candidate: the same order as the numpy selection."""
    rng = np.random.default_rng(top_k + 10)
    priors = 3000
    scores = (np.round(rng.standard_normal((3, priors)) * 4) / 4).astype(np.float32)
    scores[0, ::7] = -0.0
    scores[0, 3::7] = 0.0
    scores[1, ::11] = np.nan
    scores[2] = 0.25  # all tied
    boxes = np.zeros((1, priors, 4), np.float32)  # no overlaps: NMS keeps every candidate
    for threshold in (-1.0, -0.5, 0.0, 0.25):
        got = native_nms.nms_classes(boxes, scores, threshold, 0.5, 1.0, top_k)
        for c in range(3):
            assert list(got[c]) == list(detection._candidates(scores[c], threshold, top_k)), (c, threshold)


def test_native_build_is_cached_and_its_absence_leaves_numpy(tmp_path, monkeypatch):
    """A second process finds the built library in MO_CORE_HOME; without a compiler the
    load fails with what to install (the real build is the tests above), and a plan
    then runs DetectionOutput on numpy and says why."""
    monkeypatch.setenv("MO_CORE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(native_build, "_LOADED", {})
    native_build.load_native(native_nms.SOURCE, native_nms.CDEF)
    built = list((tmp_path / "home" / "native").iterdir())
    assert [p.suffix for p in built] == [".so"]
    monkeypatch.setattr(native_build, "_LOADED", {})
    monkeypatch.setattr(native_build.subprocess, "run", _no_compiler_run)  # a rebuild would fail now
    native_build.load_native(native_nms.SOURCE, native_nms.CDEF)  # found, not rebuilt
    monkeypatch.setattr(native_build, "_LOADED", {})
    monkeypatch.setenv("MO_CORE_HOME", str(tmp_path / "other"))
    monkeypatch.setattr(native_build.shutil, "which", lambda name: None)
    with pytest.raises(NativeUnavailable, match="apt-get install gcc"):
        native_build.load_native(native_nms.SOURCE, native_nms.CDEF)


def _no_compiler_run(*args, **kwargs):
    raise OSError("no compiler in this test")


def test_detection_output_without_the_native_build_runs_numpy(tmp_path, monkeypatch):
    monkeypatch.setenv("MO_CORE_CPU_BACKEND", "onednn")
    monkeypatch.setattr(native_build, "_LOADED", {"detection_output": NativeUnavailable("no compiler here (test)")})
    c = caffe_case(tmp_path, SSD_MANY, {"data": (1, 3, 32, 32)}, scale=0.3)
    perf = []
    ours, ref = c.run()
    c.plan.infer(c.inputs, perf=perf)
    assert {row.name: row.backend for row in perf}["det"] == "numpy"
    assert "no compiler here" in c.plan.program.fallbacks["det"]
    kept = ref["det"].shape[2]
    assert_close(ours["det"][:, :, :kept], ref["det"], 1e-4, "detections")


def _detection_kernel(rng, classes, priors, n):
    """A DetectionOutput kernel with random attributes, and inputs for it."""
    from device_daemons.cpu.kernels import KERNELS
    from ir import Layer, Port
    share = bool(rng.random() < 0.6)
    loc_classes = 1 if share else classes
    attrs = {"num_classes": classes, "share_location": int(share),
             "background_label_id": int(rng.choice([0, -1, classes - 1])),
             "nms_threshold": float(rng.choice([0.3, 0.5, 0.7])), "top_k": int(rng.choice([-1, 5, 50, 400])),
             "eta": float(rng.choice([1.0, 1.0, 0.9])),
             "code_type": str(rng.choice(["caffe.PriorBoxParameter.CORNER", "caffe.PriorBoxParameter.CENTER_SIZE",
                                          "caffe.PriorBoxParameter.CORNER_SIZE"])),
             "variance_encoded_in_target": int(rng.random() < 0.3), "keep_top_k": int(rng.choice([-1, 0, 7, 60])),
             "confidence_threshold": float(rng.choice([0.0, 0.2, 0.6])),
             "clip_before_nms": int(rng.random() < 0.3), "clip_after_nms": int(rng.random() < 0.5),
             "drop_empty_boxes": int(rng.random() < 0.4)}
    if attrs["keep_top_k"] == -1 and attrs["top_k"] == -1:
        attrs["keep_top_k"] = 100
    pixels = rng.random() < 0.25  # R-FCN's priors: [image, x1, y1, x2, y2] in pixels, no variances
    if pixels:
        attrs.update(normalized=0, input_width=300, input_height=200, variance_encoded_in_target=1)
    prior_shape = (1, 1, priors * 5) if pixels else (1, 2, priors * 4)
    layer = Layer(1, "det", "DetectionOutput", data={k: str(v) for k, v in attrs.items()},
                  inputs=[Port(0, (n, priors * loc_classes * 4)), Port(1, (n, priors * classes)),
                          Port(2, prior_shape)], outputs=[Port(3, (1, 1, 1, 7))])
    kernel = KERNELS["DetectionOutput"](layer)
    xy = rng.random((priors, 2))
    if attrs["drop_empty_boxes"]:  # boxes past the image's edges: empty once clipped
        xy = xy * 1.6 - 0.5
    corners = np.concatenate([xy, xy + rng.random((priors, 2)) * 0.4], 1)
    if pixels:
        prior = np.concatenate([np.zeros((priors, 1)), corners * [300, 200, 300, 200]], 1)
    else:
        prior = np.concatenate([corners.reshape(-1), np.tile([0.1, 0.1, 0.2, 0.2], priors)])
    prior = prior.astype(np.float32).reshape(prior_shape)
    loc = (rng.standard_normal((n, priors * loc_classes * 4)) * 0.5).astype(np.float32)
    conf = rng.random((n, priors * classes)).astype(np.float32)
    if rng.random() < 0.3:
        conf = np.round(conf * 4) / 4  # ties
    return kernel, [loc, conf, prior]


def test_native_detection_output_gives_the_numpy_kernels_rows():
    """The fast backend's C DetectionOutput (decoding, NMS, keep_top_k, rows) against the
    numpy kernel on random attributes and inputs: the same rows in the same order."""
    from device_daemons.cpu.native import detection_output as native
    native.load()
    rng = np.random.default_rng(7)
    detections = 0
    for case in range(200):
        n = int(rng.integers(1, 3))
        kernel, inputs = _detection_kernel(rng, int(rng.integers(2, 7)), int(rng.integers(1, 120)), n)
        (shape,) = kernel.getMemoryShapes([x.shape for x in inputs])
        want = kernel.forward(inputs)[0]
        assert kernel.accelerate() == "native"
        got = kernel.forward(inputs)[0]
        kernel._native = None
        assert got.shape == want.shape == shape, case
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=f"case {case}")
        assert np.array_equal(got[..., :3], want[..., :3]), case  # image, label, score: exact
        detections += int((want[0, 0, :, 0] >= 0).sum())
    assert detections > 1000


EMPTY_BOX_PRIORS = np.float32([[0.1, -0.5, 0.4, -0.1],   # above the image: no area once clipped
                                [0.2, 0.2, 0.5, 0.5],
                                [0.6, 0.6, 0.9, 0.9],
                                [0.3, 0.3, 0.3, 0.6]])  # no width


def empty_box_case(drop: bool):
    """DetectionOutput over four corner priors (no offsets: the boxes are the priors), one class
    scoring 0.9, 0.8, 0.7, 0.85: (attributes, inputs, the rows drop_empty_boxes 1 gives)."""
    attrs = {"num_classes": 2, "share_location": 1, "background_label_id": 0, "nms_threshold": 0.5,
             "top_k": -1, "code_type": "caffe.PriorBoxParameter.CORNER", "keep_top_k": 2,
             "confidence_threshold": 0.1, "clip_after_nms": 1, "drop_empty_boxes": int(drop)}
    loc = np.zeros((1, 16), np.float32)
    conf = np.float32([[0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.15, 0.85]])
    prior = np.concatenate([EMPTY_BOX_PRIORS.ravel(), np.full(16, 0.1, np.float32)]).reshape(1, 2, 16)
    kept = np.float32([[0, 1, 0.8, 0.2, 0.2, 0.5, 0.5], [0, 1, 0.7, 0.6, 0.6, 0.9, 0.9]])
    return attrs, [loc, conf, prior], kept


@pytest.mark.parametrize("native", [False, True], ids=["numpy", "native"])
def test_boxes_left_empty_by_the_clip_are_dropped_before_keep_top_k(native):
    """drop_empty_boxes (the TF Object Detection API's NMS): a detection whose box as written
    has no area - wholly outside the image before the clip, or of no width - is dropped, and
    the next best takes its keep_top_k place; without it they are the two kept."""
    from device_daemons.cpu.kernels import KERNELS
    from ir import Layer, Port
    for drop in (True, False):
        attrs, inputs, kept = empty_box_case(drop)
        layer = Layer(1, "det", "DetectionOutput", data={k: str(v) for k, v in attrs.items()},
                      inputs=[Port(i, x.shape) for i, x in enumerate(inputs)], outputs=[Port(3, (1, 1, 2, 7))])
        kernel = KERNELS["DetectionOutput"](layer)
        if native:
            assert kernel.accelerate() == "native"
        (rows,) = kernel.forward(inputs)
        if drop:
            np.testing.assert_allclose(rows[0, 0], kept, atol=1e-7)
        else:  # the empty ones, best first: the one above the image clipped to y = 0
            np.testing.assert_allclose(rows[0, 0], [[0, 1, 0.9, 0.1, 0, 0.4, 0], [0, 1, 0.85, 0.3, 0.3, 0.3, 0.6]],
                                       atol=1e-7)


def test_native_detection_output_on_large_heads_over_openmp_threads():
    """Heads large enough for detection_output.c's parallel decoding, score gathering and
    NMS (PARALLEL_WORK): the numpy kernel's rows whatever the calling thread's team size."""
    import ctypes
    from device_daemons.cpu.native import detection_output as native
    native.load()
    gomp = ctypes.CDLL("libgomp.so.1")
    rng = np.random.default_rng(5)
    before = gomp.omp_get_max_threads()
    try:
        for case in range(4):
            kernel, inputs = _detection_kernel(rng, 21, 1000, 1)
            want = kernel.forward(inputs)[0]
            assert kernel.accelerate() == "native"
            for threads in (1, 2, 3):
                gomp.omp_set_num_threads(threads)
                got = kernel.forward(inputs)[0]
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=f"case {case}, {threads} threads")
                assert np.array_equal(got[..., :3], want[..., :3]), (case, threads)
            kernel._native = None
    finally:
        gomp.omp_set_num_threads(before)


@pytest.mark.parametrize("keep_top_k", [-1, 5])
def test_detection_output_with_the_background_class_only(keep_top_k):
    """num_classes 1 and it is the background: no label to detect, an empty output (the
    end marker first) from the C kernel as from the numpy one."""
    from device_daemons.cpu.kernels import KERNELS
    from ir import Layer, Port
    priors = 8
    attrs = {"num_classes": 1, "share_location": 1, "background_label_id": 0, "nms_threshold": 0.5, "top_k": -1,
             "code_type": "caffe.PriorBoxParameter.CORNER", "keep_top_k": keep_top_k, "confidence_threshold": 0.1}
    layer = Layer(1, "det", "DetectionOutput", data={k: str(v) for k, v in attrs.items()},
                  inputs=[Port(0, (1, priors * 4)), Port(1, (1, priors)), Port(2, (1, 2, priors * 4))],
                  outputs=[Port(3, (1, 1, 1, 7))])
    kernel = KERNELS["DetectionOutput"](layer)
    rng = np.random.default_rng(0)
    xy = rng.random((priors, 2))
    prior = np.concatenate([np.concatenate([xy, xy + 0.2], 1).reshape(-1), np.full(priors * 4, 0.1)])
    inputs = [rng.random((1, priors * 4)).astype(np.float32), rng.random((1, priors)).astype(np.float32),
              prior.astype(np.float32).reshape(1, 2, -1)]
    want = kernel.forward(inputs)[0]
    assert kernel.accelerate() == "native"
    got = kernel.forward(inputs)[0]
    assert want[0, 0, 0, 0] == -1 and not want[0, 0, 1:].any()
    np.testing.assert_array_equal(got, want)
