"""ROIPooling method=bilinear in C (roi_bilinear.c): the result of
kernels/roi_pooling.py's roi_bilinear (the same float32 operations), several times
faster on Faster R-CNN's crops (hundreds of channels, 14x14 samples per ROI); on NCHW
arrays (the numpy kernel's variant) and channels last (onednn/roi_crop.py's)."""
from __future__ import annotations

import os

import numpy as np

from ...native_build import load_native

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "roi_bilinear.c")
CDEF = """
int mo_roi_bilinear(const float *feat, int64_t c, int64_t h, int64_t w, const float *rois, const int64_t *batch,
                    int64_t count, int64_t rois_total, int64_t ph, int64_t pw, float *out);
int mo_roi_bilinear_nhwc(const float *feat, int64_t c, int64_t h, int64_t w, const float *rois,
                         const int64_t *batch, int64_t count, int64_t rois_total, int64_t ph, int64_t pw,
                         int64_t kh, int64_t kw, float *out);
"""


def load():
    """Builds / loads the library now (NativeUnavailable says why it cannot)."""
    load_native(SOURCE, CDEF)


def roi_bilinear(feat, rois, count, pooled_h, pooled_w, batch_index) -> np.ndarray:
    """kernels/roi_pooling.py's roi_bilinear (the same arguments and result)."""
    ffi, lib = load_native(SOURCE, CDEF)
    n, c, h, w = feat.shape
    feat = np.ascontiguousarray(feat, np.float32)
    rois = np.ascontiguousarray(rois, np.float32)
    batch = np.array([batch_index(rois[r, 0], n) for r in range(count)] or [0], np.int64)
    out = np.empty((len(rois), c, pooled_h, pooled_w), np.float32)
    if out.size:
        status = lib.mo_roi_bilinear(ffi.from_buffer("float[]", feat), c, h, w, ffi.from_buffer("float[]", rois),
                                     ffi.from_buffer("int64_t[]", batch), count, len(rois), pooled_h, pooled_w,
                                     ffi.from_buffer("float[]", out, require_writable=True))
        if status:
            raise MemoryError("ROIPooling's bilinear sampling could not allocate its scratch memory")
    return out


def roi_bilinear_nhwc(feat, rois, count, batch, out, crop=None, pool=(1, 1)) -> None:
    """The same crops channels last, written into `out`: feat (n, h, w, c) and out
    (len(rois), ph, pw, c) C-contiguous float32 arrays; batch: the checked batch
    index of each of the first `count` ROIs. With `pool` (kh, kw) a max pooling of
    that kernel and stride follows: the crops are `crop` (ph, pw) and out holds
    (len(rois), ph // kh, pw // kw, c)."""
    ffi, lib = load_native(SOURCE, CDEF)
    n, h, w, c = feat.shape
    total = out.shape[0]
    ph, pw = crop or out.shape[1:3]
    batch = np.ascontiguousarray(batch[:count] if count else np.zeros(1), np.int64)
    status = lib.mo_roi_bilinear_nhwc(ffi.from_buffer("float[]", feat), c, h, w,
                                      ffi.from_buffer("float[]", np.ascontiguousarray(rois, np.float32)),
                                      ffi.from_buffer("int64_t[]", batch), count, total, ph, pw, pool[0], pool[1],
                                      ffi.from_buffer("float[]", out, require_writable=True))
    if status:
        raise MemoryError("ROIPooling's bilinear sampling could not allocate its scratch memory")
