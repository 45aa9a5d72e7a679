"""DetectionOutput's candidate selection and NMS in C (nms.c) on its own: the same
result as kernels/detection.py's nms_classes / nms_fast, a few times faster on
SSD-sized heads. The fast backend runs it inside detection_output.c (which includes
nms.c); this face of it is what tests/cpu/test_cpu_nms.py holds to the numpy rule."""
from __future__ import annotations

import os

import numpy as np

from ...native_build import load_native

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nms.c")
CDEF = """
int mo_nms_classes(const float *boxes, int64_t groups, const float *scores, int64_t classes, int64_t priors,
                   float threshold, float nms_threshold, float eta, int64_t top_k, int32_t *kept,
                   int64_t *kept_count);
"""


def load():
    """Builds / loads the library now (NativeUnavailable says why it cannot)."""
    load_native(SOURCE, CDEF)


def nms_classes(boxes, scores, threshold, nms_threshold, eta, top_k) -> list[np.ndarray]:
    """boxes (classes or 1, priors, 4) corner boxes, scores (classes, priors) -> per
    class the kept prior indices, best first (Caffe's ApplyNMSFast with eta)."""
    ffi, lib = load_native(SOURCE, CDEF)
    boxes = np.ascontiguousarray(boxes, np.float32)
    scores = np.ascontiguousarray(scores, np.float32)
    groups, priors = boxes.shape[0], boxes.shape[1]
    classes = scores.shape[0]
    if boxes.shape[2:] != (4,) or scores.shape[1] != priors or groups not in (1, classes):
        raise ValueError(f"boxes {list(boxes.shape)} and scores {list(scores.shape)} do not match")
    cap = priors if top_k < 0 or top_k > priors else top_k
    kept = np.empty((classes, max(cap, 1)), np.int32)
    counts = np.zeros(classes, np.int64)
    status = lib.mo_nms_classes(ffi.from_buffer("float[]", boxes), groups, ffi.from_buffer("float[]", scores),
                                classes, priors, threshold, nms_threshold, eta, top_k,
                                ffi.from_buffer("int32_t[]", kept, require_writable=True),
                                ffi.from_buffer("int64_t[]", counts, require_writable=True))
    if status:
        raise MemoryError("DetectionOutput's NMS could not allocate its scratch memory")
    return [kept[c, :counts[c]].astype(np.int64) for c in range(classes)]
