"""Detection heads: PriorBox and PriorBoxClustered (PriorBoxClustered), DetectionOutput
(DetectionOutput-1), Proposal (Proposal-4, below).

Caffe's PriorBox boxes at one position are a list of (width, height) pairs
(ir.priors.prior_box_sizes); PriorBoxClustered takes exactly such a list, with
separate x and y steps, so both layer types map to it. Its [2, H*W*P*4] output
gets the batch axis of the IR's [1, 2, H*W*P*4].
"""
from __future__ import annotations

import numpy as np

from ...priors import prior_box_sizes
from .base import Mapping, Unmappable, maps

def _priors(m: Mapping, sizes: list[tuple[float, float]]):
    a = m.attrs
    feat = m.in_dims(0)
    if len(feat) != 4:
        raise a.error(f"needs a 4-D feature map input, got {list(feat)}")
    img_h, img_w = a["img_h"], a["img_w"]
    if not (img_h and img_w) and a.values.get("img_size"):
        img_h = img_w = a["img_size"]
    if not (img_h and img_w):
        if len(m.layer.inputs) < 2 or len(m.in_dims(1)) < 4:
            raise a.error("has no img_h/img_w (or img_size) and no image input to take the size from")
        img_h, img_w = m.in_dims(1)[2:4]
    step_h, step_w = a["step_h"], a["step_w"]
    if not (step_h and step_w):
        step_h = step_w = a["step"]
    if not (step_h and step_w):
        step_h, step_w = img_h / feat[2], img_w / feat[3]
    variance = a["variance"] or [0.1]
    if len(variance) not in (1, 4):
        raise a.error(f"variance has {len(variance)} values; give 1 or 4")
    attrs = {"width": [w for w, _ in sizes], "height": [h for _, h in sizes], "clip": a["clip"],
             "step_w": step_w, "step_h": step_h, "step": 0.0, "offset": a["offset"],
             "variance": variance * 4 if len(variance) == 1 else variance}
    out = m.out_dims()
    boxes = m.op("PriorBoxClustered", [m.ints(feat[2:4], "output_size"), m.ints([img_h, img_w], "image_size")],
                 out[1:], "priors", attrs=attrs)
    return [m.reshape(boxes, out, None)]


@maps("PriorBox")
def prior_box(m: Mapping):
    a = m.attrs
    min_size, max_size, scale_all = a["min_size"], a["max_size"] or [], a["scale_all_sizes"]
    if not min_size or min(min_size) <= 0:
        raise a.error(f"min_size {min_size} must list positive sizes")
    if scale_all and max_size and len(max_size) != len(min_size):
        raise a.error(f"has {len(max_size)} max_size values for {len(min_size)} min_size values")
    sizes = prior_box_sizes(min_size, max_size, a["aspect_ratio"] or [], a["flip"], scale_all)
    return _priors(m, sizes)


@maps("PriorBoxClustered")
def prior_box_clustered(m: Mapping):
    widths, heights = m.attrs["width"], m.attrs["height"]
    if len(widths) != len(heights) or not widths:
        raise m.attrs.error(f"needs as many widths as heights (got {len(widths)} and {len(heights)})")
    return _priors(m, list(zip(widths, heights)))


def _rows(m: Mapping, x, suffix):
    """[N, ...] -> [N, everything else] (DetectionOutput takes 2-D loc and conf)."""
    return m.reshape(x, (x.shape[0], int(np.prod(x.shape[1:]))), suffix)


def _without_empty_boxes(m: Mapping, y, out):
    """DetectionOutput rows [1, 1, R, 7] -> the IR's out[2] best of those with an image id and a box of some
    area, best score first (ties in OpenVINO's order), then rows [-1, 0, ...]."""
    count = y.shape[2]
    rows = m.reshape(y, (count, 7), "rows")

    def column(index, suffix):
        return m.op("Gather", [rows, m.ints([index], f"{suffix}/index"), m.ints([1], f"{suffix}/axis")],
                    (count, 1), suffix, version="opset8", attrs={"batch_dims": 0})

    numpy = {"auto_broadcast": "numpy"}
    x1, y1, x2, y2 = (column(3 + j, f"empty/{c}") for j, c in enumerate(("x1", "y1", "x2", "y2")))
    width = m.op("Subtract", [x2, x1], (count, 1), "empty/width", attrs=numpy)
    height = m.op("Subtract", [y2, y1], (count, 1), "empty/height", attrs=numpy)
    area = m.op("Multiply", [width, height], (count, 1), "empty/area", attrs=numpy)
    zero = m.const(np.float32(0), "empty/zero")
    has_area = m.op("Greater", [area, zero], (count, 1), "empty/has_area", element_type="boolean", attrs=numpy)
    detected = m.op("GreaterEqual", [column(0, "empty/image"), zero], (count, 1), "empty/detected",
                    element_type="boolean", attrs=numpy)
    kept = m.op("LogicalAnd", [has_area, detected], (count, 1), "empty/kept", element_type="boolean", attrs=numpy)
    lowest = m.const(np.float32(np.finfo(np.float32).min), "empty/lowest")
    key = m.op("Select", [kept, column(2, "empty/score"), lowest], (count, 1), "empty/key", attrs=numpy)
    key = m.reshape(key, (count,), "empty/key/flat")
    take = out[2]
    top = m.model.add("TopK", [key, m.model.const(take, name=m.name("empty/k"), element_type="i64")],
                      [(take,), (take,)], name=m.name("empty/best"), version="opset11", element_types=["f32", "i32"],
                      attrs={"axis": 0, "mode": "max", "sort": "value", "index_element_type": "i32", "stable": True})
    order = top.outputs[1]
    axis0 = m.ints([0], "empty/axis0")
    picked = m.op("Gather", [rows, order, axis0], (take, 7), "empty/picked", version="opset8",
                  attrs={"batch_dims": 0})
    picked_kept = m.op("Gather", [kept, order, axis0], (take, 1), "empty/picked_kept", version="opset8",
                       attrs={"batch_dims": 0}, element_type="boolean")
    end = m.const(np.float32([[-1, 0, 0, 0, 0, 0, 0]]), "empty/end")
    return m.reshape(m.op("Select", [picked_kept, picked, end], (take, 7), "empty/rows", attrs=numpy), out, None)


@maps("DetectionOutput")
def detection_output(m: Mapping):
    a = m.attrs
    if a["eta"] != 1.0:
        raise Unmappable("adaptive NMS (eta < 1)")
    threshold = a["confidence_threshold"]
    if not np.isfinite(threshold):  # Caffe's "no threshold"; OpenVINO reads finite numbers only
        threshold = float(np.finfo(np.float32).min)
    attrs = {"num_classes": a["num_classes"], "background_label_id": a["background_label_id"], "top_k": a["top_k"],
             "variance_encoded_in_target": a["variance_encoded_in_target"], "keep_top_k": [a["keep_top_k"]],
             "code_type": a["code_type"], "share_location": a["share_location"],
             "nms_threshold": a["nms_threshold"], "confidence_threshold": threshold, "clip_after_nms": a["clip_after_nms"],
             "clip_before_nms": a["clip_before_nms"], "decrease_label_id": False, "normalized": a["normalized"],
             "input_height": a["input_height"], "input_width": a["input_width"], "objectness_score": 0.0}
    loc, conf = _rows(m, m.inputs[0], "loc"), _rows(m, m.inputs[1], "conf")
    inputs = [loc, conf] + list(m.inputs[2:])
    out = m.out_dims()
    n = loc.shape[0]
    priors = m.inputs[2].shape[-1] // (4 if attrs["normalized"] else 5)
    keep, top_k, classes = attrs["keep_top_k"][0], attrs["top_k"], attrs["num_classes"]
    candidates = top_k * classes if top_k > 0 else priors * classes
    if a["drop_empty_boxes"]:
        # OpenVINO's DetectionOutput keeps a box left with no area by the clip: twice the rows are asked
        # for, and the empty ones go after it (exact while at most keep_top_k of the best 2 x keep_top_k
        # are empty: the OD API drops them before its cut)
        if n != 1:
            raise Unmappable("dropping empty boxes over a batch of more than one image")
        if keep > 0:
            attrs["keep_top_k"] = [min(2 * keep, candidates)]
        y = m.op("DetectionOutput", inputs, (1, 1, attrs["keep_top_k"][0] if keep > 0 else candidates, 7), "all",
                 attrs=attrs)
        return [_without_empty_boxes(m, y, out)]
    # OpenVINO's row count; the IR's can be smaller (keep_top_k unset, top_k set):
    # the rows past it are cut as the CPU daemon cuts them
    rows = n * (keep if keep > 0 else candidates)
    if rows == out[2]:
        return [m.op("DetectionOutput", inputs, out, attrs=attrs)]
    if rows < out[2]:
        raise m.attrs.error(f"the IR says {out[2]} detection rows, OpenVINO makes {rows}")
    y = m.op("DetectionOutput", inputs, (1, 1, rows, 7), "all", attrs=attrs)
    cut = [y, m.ints([0], "cut/start"), m.ints([out[2]], "cut/stop"), m.ints([1], "cut/step"), m.ints([2], "cut/axes")]
    return [m.op("Slice", cut, out, version="opset8")]


# --- Proposal ------------------------------------------------------------------------
# Proposal -> Proposal-4 (framework caffe), the op mo writes for it: the IR v2 layer
# and OpenVINO's op mean the same thing (the standard anchors of
# ir.priors.proposal_anchors, min_size scaled by the image-info input, each image's
# ROIs in its own post_nms_topn rows ending with a batch index -1). The op takes the
# image info as a 1-D [3] or [4] tensor: the first image's row, as the CPU kernel reads it.

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
