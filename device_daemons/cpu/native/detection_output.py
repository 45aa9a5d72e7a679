"""DetectionOutput in C (detection_output.c, with nms.c): decoding, per-class NMS, the
keep_top_k cut and the rows, as kernels/detection.py's DetectionOutput computes them."""
from __future__ import annotations

import os

import numpy as np

from ...native_build import load_native

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "detection_output.c")
CDEF = """
int64_t mo_detection_output(const float *loc, const float *conf, const float *prior, int64_t prior_size,
                            const double *scale, const float *var,
                            int64_t n, int64_t priors, int64_t classes, int64_t loc_classes, int code_type,
                            const int64_t *labels, int64_t n_labels, float threshold, float nms_threshold,
                            float eta, int64_t top_k, int64_t keep_top_k, int clip_before, int clip_after,
                            int drop_empty, float *out, int64_t out_rows);
"""
CODE_TYPES = {"corner": 0, "center_size": 1, "corner_size": 2}


def load():
    """Builds / loads the library now (NativeUnavailable says why it cannot)."""
    load_native(SOURCE, CDEF)


def detection_output(loc, conf, prior, variances, n, loc_classes, out_rows, k) -> np.ndarray:
    """The [1, 1, out_rows, 7] output of DetectionOutput kernel `k` (its attributes) for n
    images' loc (n x priors x loc_classes x 4 values) and conf (n x priors x classes),
    `prior` (priors x k.prior_size values: corner boxes in the last 4, in pixels of
    k.pixel_scale unless it is None) and `variances` (priors x 4, None: ones), all float32;
    the classes but the background from k.labels."""
    ffi, lib = load_native(SOURCE, CDEF)
    loc = np.ascontiguousarray(loc, np.float32)
    conf = np.ascontiguousarray(conf, np.float32)
    prior = np.ascontiguousarray(prior, np.float32)
    labels = k.labels
    priors = prior.size // k.prior_size
    out = np.empty((1, 1, out_rows, 7), np.float32)
    done = lib.mo_detection_output(
        ffi.from_buffer("float[]", loc), ffi.from_buffer("float[]", conf), ffi.from_buffer("float[]", prior),
        k.prior_size, ffi.NULL if k.pixel_scale is None else ffi.from_buffer("double[]", k.pixel_scale),
        ffi.NULL if variances is None else ffi.from_buffer("float[]", np.ascontiguousarray(variances, np.float32)),
        n, priors, conf.size // (n * priors), loc_classes, CODE_TYPES[k.code_type],
        ffi.from_buffer("int64_t[]", labels), len(labels), k.confidence_threshold, k.nms_threshold, k.eta, k.top_k,
        k.keep_top_k, int(bool(k.clip_before_nms)), int(bool(k.clip_after_nms)),
        int(bool(k.drop_empty_boxes)),
        ffi.from_buffer("float[]", out, require_writable=True), out_rows)
    if done < 0:
        raise MemoryError("DetectionOutput could not allocate its scratch memory")
    return out
