"""Proposal -> Proposal-4 (framework caffe), the op mo writes for it.

The IR v2 layer and OpenVINO's op mean the same thing (the standard anchors of
ir.priors.proposal_anchors, min_size scaled by the image-info input, each image's
ROIs in its own post_nms_topn rows ending with a batch index -1). The op takes the
image info as a 1-D [3] or [4] tensor: the first image's row, as the CPU kernel reads it.
"""
from __future__ import annotations

import numpy as np

from .base import Mapping, maps


@maps("Proposal")
def proposal(m: Mapping):
    a = m.attrs
    if len(m.inputs) != 3:
        raise a.error(f"takes 3 inputs (class scores, box deltas, image info), got {len(m.inputs)}")
    scores, deltas, info = m.inputs
    if scores.shape[1] > deltas.shape[1]:  # 2 scores and 4 deltas per anchor: order them by size
        scores, deltas = deltas, scores
    ratios, scales = a["ratio"], a["scale"]
    if not ratios or not scales:
        raise a.error("needs non-empty ratio and scale lists")
    n_a = len(ratios) * len(scales)
    n, _, h, w = scores.shape
    if len(scores.shape) != 4 or scores.shape[1] != 2 * n_a or deltas.shape != (n, 4 * n_a, h, w):
        raise a.error(f"inputs {list(scores.shape)} and {list(deltas.shape)} do not match {n_a} anchors")
    values = info.shape[-1] if info.shape else 0
    if values not in (3, 4):
        raise a.error(f"the image info input must hold 3 or 4 values a row, got {list(info.shape)}")
    if len(info.shape) != 1:
        rows = m.reshape(info, (int(np.prod(info.shape)) // values, values), "image_info/rows")
        info = m.op("Gather", [rows, m.model.const(0, name=m.name("image_info/first"), element_type="i64"),
                               m.model.const(0, name=m.name("image_info/axis"), element_type="i64")],
                    (values,), "image_info", version="opset8", attrs={"batch_dims": 0})
    post = a["post_nms_topn"]
    attrs = {"base_size": a["base_size"], "pre_nms_topn": a["pre_nms_topn"], "post_nms_topn": post,
             "nms_thresh": a["nms_thresh"], "feat_stride": a["feat_stride"], "min_size": a["min_size"],
             "ratio": [float(r) for r in ratios], "scale": [float(s) for s in scales],
             "clip_before_nms": True, "clip_after_nms": False, "normalize": False,
             "box_size_scale": 1.0, "box_coordinate_scale": 1.0, "framework": ""}
    op = m.model.add("Proposal", [scores, deltas, info], [(n * post, 5), (n * post,)], name=m.name(),
                     version="opset4", attrs=attrs)
    return [op.outputs[0]]
