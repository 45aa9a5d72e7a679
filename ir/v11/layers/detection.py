"""Detection heads: PriorBox and PriorBoxClustered (PriorBoxClustered), DetectionOutput
(DetectionOutput-1), Proposal (its computation in opset ops, below).

Caffe's PriorBox boxes at one position are a list of (width, height) pairs
(ir.priors.prior_box_sizes); PriorBoxClustered takes exactly such a list, with
separate x and y steps, so both layer types map to it. Its [2, H*W*P*4] output
gets the batch axis of the IR's [1, 2, H*W*P*4].
"""
from __future__ import annotations

import numpy as np

from ...priors import prior_box_sizes, proposal_anchors
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
             "nms_threshold": a["nms_threshold"], "confidence_threshold": threshold, "clip_after_nms": False,
             "clip_before_nms": False, "decrease_label_id": False, "normalized": a["normalized"],
             "input_height": a["input_height"], "input_width": a["input_width"], "objectness_score": 0.0}
    loc, conf = _rows(m, m.inputs[0], "loc"), _rows(m, m.inputs[1], "conf")
    inputs = [loc, conf] + list(m.inputs[2:])
    out = m.out_dims()
    n = loc.shape[0]
    priors = m.inputs[2].shape[-1] // (4 if attrs["normalized"] else 5)
    keep, top_k, classes = attrs["keep_top_k"][0], attrs["top_k"], attrs["num_classes"]
    # OpenVINO's row count; the IR's can be smaller (keep_top_k unset, top_k set):
    # the rows past it are cut as the CPU daemon cuts them
    rows = n * (keep if keep > 0 else top_k * classes if top_k > 0 else priors * classes)
    if rows == out[2]:
        return [m.op("DetectionOutput", inputs, out, attrs=attrs)]
    if rows < out[2]:
        raise m.attrs.error(f"the IR says {out[2]} detection rows, OpenVINO makes {rows}")
    y = m.op("DetectionOutput", inputs, (1, 1, rows, 7), "all", attrs=attrs)
    cut = [y, m.ints([0], "cut/start"), m.ints([out[2]], "cut/stop"), m.ints([1], "cut/step"), m.ints([2], "cut/axes")]
    return [m.op("Slice", cut, out, version="opset8")]


# --- Proposal ------------------------------------------------------------------------
# Proposal -> the layer's computation in opset ops, with NonMaxSuppression-9.
#
# OpenVINO's Proposal op makes other anchors than this project's Caffe Proposal (its
# scales multiply the base size, this Caffe's divide the scaled side by it:
# ir.priors.proposal_anchors), so the layer is spelled out: the shifted anchors are
# constants; the deltas decode them (widths with +1, as Faster R-CNN), boxes are
# clipped to the image of the image-info input, boxes smaller than min_size get
# score 0, the pre_nms_topn best go to NMS (pixel IoU: +1 on the far corners), and
# the kept boxes of every image, [batch index, x1, y1, x2, y2], are written one after
# the other into the [N * post_nms_topn, 5] output, the rest zero.

_NUMPY = {"auto_broadcast": "numpy"}


class _Ops:
    """Short spellings of the element-wise steps (names numbered per layer)."""

    def __init__(self, m: Mapping):
        self.m = m
        self.count = 0

    def _name(self, what):
        self.count += 1
        return f"{what}{self.count}"

    def const(self, value):
        return self.m.const(np.asarray(value, np.float32), self._name("c"))

    def binary(self, type_, a, b, shape, element_type="f32"):
        return self.m.op(type_, [a, b], shape, self._name(type_.lower()), attrs=_NUMPY, element_type=element_type)

    def clip(self, v, hi, shape):
        return self.binary("Minimum", self.binary("Maximum", v, self.const(0.0), shape), hi, shape)


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
    anchors = proposal_anchors(a["base_size"], ratios, scales)
    n_a = len(anchors)
    n, _, h, w = scores.shape
    if len(scores.shape) != 4 or scores.shape[1] != 2 * n_a or deltas.shape != (n, 4 * n_a, h, w):
        raise a.error(f"inputs {list(scores.shape)} and {list(deltas.shape)} do not match {n_a} anchors")
    post, pre, stride = a["post_nms_topn"], a["pre_nms_topn"], a["feat_stride"]
    count = h * w * n_a
    o = _Ops(m)
    f32 = np.float32

    # the anchors at every position, in (h, w, anchor) order
    shift_y, shift_x = np.meshgrid(np.arange(h, dtype=f32) * stride, np.arange(w, dtype=f32) * stride, indexing="ij")
    base = np.empty((h, w, n_a, 4), f32)
    base[..., 0::2] = shift_x[..., None, None] + anchors[:, 0::2]
    base[..., 1::2] = shift_y[..., None, None] + anchors[:, 1::2]
    base = base.reshape(count, 4)
    bw = base[:, 2] - base[:, 0] + f32(1)
    bh = base[:, 3] - base[:, 1] + f32(1)
    cx = base[:, 0] + f32(0.5) * bw
    cy = base[:, 1] + f32(0.5) * bh

    rows = (n, count)
    d = m.reshape(deltas, (n, n_a, 4, h, w), "deltas")
    d = m.op("Transpose", [d, m.ints([0, 3, 4, 1, 2], "deltas/order")], (n, h, w, n_a, 4), "deltas/hwa")
    d = m.reshape(d, (n, count, 4), "deltas/rows")
    parts = m.model.add("Split", [d, m.model.const(2, name=m.name("deltas/axis"), element_type="i64")],
                        [(n, count, 1)] * 4, name=m.name("deltas/split"), attrs={"num_splits": 4}).outputs
    dx, dy, dw, dh = (m.reshape(t, rows, f"d{i}") for i, t in enumerate(parts))
    pcx = o.binary("Add", o.binary("Multiply", dx, o.const(bw), rows), o.const(cx), rows)
    pcy = o.binary("Add", o.binary("Multiply", dy, o.const(bh), rows), o.const(cy), rows)
    half_w = o.binary("Multiply", o.binary("Multiply", m.op("Exp", [dw], rows, "exp_w"), o.const(bw), rows),
                      o.const(0.5), rows)
    half_h = o.binary("Multiply", o.binary("Multiply", m.op("Exp", [dh], rows, "exp_h"), o.const(bh), rows),
                      o.const(0.5), rows)

    axis0 = m.model.const(0, name=m.name("axis0"), element_type="i64")
    info = m.reshape(info, (int(np.prod(info.shape)),), "image_info")
    limit = []
    for i, what in ((0, "height"), (1, "width")):
        index = m.model.const(i, name=m.name(f"info/{what}_index"), element_type="i64")
        side = m.op("Gather", [info, index, axis0], (), f"info/{what}", version="opset8", attrs={"batch_dims": 0})
        limit.append(o.binary("Subtract", side, o.const(1.0), ()))
    max_y, max_x = limit
    x1 = o.clip(o.binary("Subtract", pcx, half_w, rows), max_x, rows)
    y1 = o.clip(o.binary("Subtract", pcy, half_h, rows), max_y, rows)
    x2 = o.clip(o.binary("Add", pcx, half_w, rows), max_x, rows)
    y2 = o.clip(o.binary("Add", pcy, half_h, rows), max_y, rows)

    # boxes smaller than min_size keep their place with score 0
    min_box = o.const(float(a["min_size"]))
    big = [o.binary("GreaterEqual", o.binary("Add", o.binary("Subtract", hi, lo, rows), o.const(1.0), rows),
                    min_box, rows, "boolean") for lo, hi in ((x1, x2), (y1, y2))]
    ok = m.op("Convert", [o.binary("LogicalAnd", big[0], big[1], rows, "boolean")], rows, "big_enough",
              attrs={"destination_type": "f32"})
    fg = m.op("Slice", [scores, m.ints([n_a], "fg/start"), m.ints([2 * n_a], "fg/stop"), m.ints([1], "fg/step"),
                        m.ints([1], "fg/axes")], (n, n_a, h, w), "fg", version="opset8")
    fg = m.op("Transpose", [fg, m.ints([0, 2, 3, 1], "fg/order")], (n, h, w, n_a), "fg/hwa")
    score = o.binary("Multiply", m.reshape(fg, rows, "fg/rows"), ok, rows)
    boxes = m.op("Concat", [m.reshape(t, (n, count, 1), f"coord{i}") for i, t in enumerate((x1, y1, x2, y2))],
                 (n, count, 4), "boxes", attrs={"axis": 2})

    # the best pre_nms_topn (stable: equal scores keep their order), then NMS
    k = min(pre, count)
    top = m.model.add("TopK", [score, m.model.const(k, name=m.name("top/k"), element_type="i64")],
                      [(n, k), (n, k)], name=m.name("top"), version="opset11", element_types=["f32", "i32"],
                      attrs={"axis": 1, "mode": "max", "sort": "value", "index_element_type": "i32", "stable": True})
    top_scores, top_index = top.outputs
    # (a Gather with batch_dims=1 from the Concat of the coordinates picks wrong
    # values on OpenVINO 2026's CPU plugin: gather from the flat [N*K, 4] instead)
    flat = m.reshape(boxes, (n * count, 4), "boxes/flat")
    offsets = m.model.const((np.arange(n, dtype=np.int32) * count).reshape(n, 1), name=m.name("top/offsets"))
    flat_index = o.binary("Add", top_index, offsets, (n, k), "i32")
    top_boxes = m.op("Gather", [flat, flat_index, axis0], (n, k, 4), "top/boxes", version="opset8",
                     attrs={"batch_dims": 0})
    nms_inputs = [o.binary("Add", top_boxes, o.const([0, 0, 1, 1]), (n, k, 4)),
                  m.reshape(top_scores, (n, 1, k), "nms/scores"),
                  m.model.const(post, name=m.name("nms/max_boxes"), element_type="i64"),
                  m.const(np.float32(a["nms_thresh"]), "nms/iou"),
                  m.const(np.finfo(f32).min, "nms/min_score")]
    nms = m.model.add("NonMaxSuppression", nms_inputs, [(-1, 3), (-1, 3), (1,)], name=m.name("nms"),
                      version="opset9", element_types=["i64", "f32", "i64"],
                      attrs={"box_encoding": "corner", "sort_result_descending": False, "output_type": "i64"})
    selected = nms.outputs[0]                                     # [M, 3]: image, class, box
    one = m.model.const(1, name=m.name("kept/axis"), element_type="i64")
    pick = m.op("Gather", [selected, m.ints([0, 2], "kept/columns"), one], (-1, 2), "kept/index", version="opset8",
                element_type="i64", attrs={"batch_dims": 0})
    kept = m.op("GatherND", [top_boxes, pick], (-1, 4), "kept/boxes", version="opset8", attrs={"batch_dims": 0})
    image = m.op("Gather", [selected, m.ints([0], "kept/image_column"), one], (-1, 1), "kept/image_index",
                 version="opset8", element_type="i64", attrs={"batch_dims": 0})
    image = m.op("Convert", [image], (-1, 1), "kept/image", attrs={"destination_type": "f32"})
    rois = m.op("Concat", [image, kept], (-1, 5), "kept/rois", attrs={"axis": 1})
    shape = m.op("ShapeOf", [rois], (2,), "kept/shape", version="opset3", element_type="i64",
                 attrs={"output_type": "i64"})
    found = m.op("Gather", [shape, m.model.const(0, name=m.name("kept/count_index"), element_type="i64"), axis0],
                 (), "kept/count", version="opset8", element_type="i64", attrs={"batch_dims": 0})
    positions = m.op("Range", [m.model.const(0, name=m.name("kept/first"), element_type="i64"), found,
                               m.model.const(1, name=m.name("kept/step"), element_type="i64")],
                     (-1,), "kept/positions", version="opset4", element_type="i64", attrs={"output_type": "i64"})
    zeros = m.const(np.zeros((n * post, 5), f32), "zeros")
    return [m.op("ScatterUpdate", [zeros, positions, rois, axis0], (n * post, 5), version="opset3")]
