"""DetectionOutput's NMS: nms_classes (all classes at once, overlaps a block of
ranks at a time) gives exactly what the sequential ApplyNMSFast rule (nms_fast)
gives, on random boxes, ties, degenerate boxes and every top_k form; and the SSD
head with hundreds of candidates per class split over many blocks against pycaffe."""
from __future__ import annotations

import numpy as np
import pytest

from device_daemons.cpu.kernels import detection
from tests.cpu.cpu_helpers import assert_close, caffe_case
from tests.cpu.test_cpu_caffe_layers import SSD_HEAD


def random_case(rng):
    classes, priors = int(rng.integers(1, 6)), int(rng.integers(1, 300))
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


def test_ssd_head_with_many_candidates_per_class_matches_pycaffe(tmp_path, monkeypatch):
    """Hundreds of candidates per class, 16-rank blocks: the blocks' suppression of
    worse ranks is exercised against pycaffe."""
    monkeypatch.setattr(detection, "NMS_BLOCK_ELEMENTS", 16 * 2 * 300)
    c = caffe_case(tmp_path, SSD_MANY.replace("confidence_threshold: 0.2", "confidence_threshold: 0.01"),
                   {"data": (1, 3, 32, 32)}, scale=0.3)
    ours, ref = c.run()
    kept = ref["det"].shape[2]
    assert kept > 100
    assert ours["det"].shape == (1, 1, 150, 7)
    assert_close(ours["det"][:, :, :kept], ref["det"], 1e-4, "detections")
    assert np.all(ours["det"][0, 0, kept:, 0] == -1)
