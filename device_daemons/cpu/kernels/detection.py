"""Detection heads: PriorBox, PriorBoxClustered, DetectionOutput (SSD), Proposal
(Faster R-CNN), SimplerNMS.

PriorBox / PriorBoxClustered: output [1, 2, H*W*num_priors*4]: normalized corner
boxes (optionally clipped to [0, 1]), then the variances. Image size from
img_h/img_w (or img_size), else the second input's H, W; step from step_h/step_w
(or step), else image size / feature map size.

DetectionOutput: SSD decoding (CORNER, CENTER_SIZE, CORNER_SIZE; variance in the
target or in the priors), per-class NMS (score > confidence_threshold, top_k, the
adaptive eta), keep_top_k over all classes. Output [1, 1, N*keep_top_k, 7] rows
[image_id, label, score, xmin, ymin, xmax, ymax] per image, by label then score;
fewer detections than rows end with one row of image_id -1, then zeros (as OpenVINO
writes it).
With normalized: false (R-FCN: the priors are the Proposal's ROIs reshaped to
[1, 1, R*5], [batch, x1, y1, x2, y2] in pixels) the prior boxes are divided by
input_width/input_height first, as OpenVINO's DetectionOutput does, so the
detections come out normalized too.

Proposal: OpenVINO's (and py-faster-rcnn's) Proposal: the standard anchors
(ir.priors.proposal_anchors), min-size filter (boxes narrower than min_size *
im_info[3] or lower than min_size * im_info[2] get score 0), score sort, NMS
(pixel IoU, +1 areas) and post_nms_topn; image i's rois [i, x1, y1, x2, y2] fill
rows i*post_nms_topn.., fewer end with a row of batch index -1, then zeros.

SimplerNMS: anchors of base size 16, ratios 0.5/1/2 and the `scale` list; boxes
clamped to the image (im_info = [height, width, scale]) and kept when at least
min_bbox_size*scale wide and high; sorted by score, pre_nms_topn, NMS (a box is
dropped when intersection > iou_threshold * union with a kept box, +1 areas) up to
post_nms_topn; output [post_nms_topn, 5] rows [0, x1, y1, x2, y2], the rest zero.
"""
from __future__ import annotations

import numpy as np

from ir.priors import prior_box_sizes, proposal_anchors

from .base import Kernel, register


class _PriorBase(Kernel):
    def _common(self):
        a = self.attrs
        self.clip, self.offset = a["clip"], a["offset"]
        self.step, self.step_h, self.step_w = a["step"], a["step_h"], a["step_w"]
        self.img_h, self.img_w = a["img_h"], a["img_w"]
        variance = a["variance"] or [0.1]
        if len(variance) not in (1, 4):
            raise self.error(f"variance has {len(variance)} values; give 1 or 4")
        self.variance = variance * 4 if len(variance) == 1 else variance
        self._cache_key = None

    def num_priors(self) -> int:
        raise NotImplementedError

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, (1, 2))
        shape = input_shapes[0]
        if len(shape) != 4:
            raise self.error(f"needs a 4-D feature map input, got {list(shape)}")
        return [(1, 2, shape[2] * shape[3] * self.num_priors() * 4)]

    def _image_size(self, input_shapes):
        h, w = self.img_h, self.img_w
        if not (h and w) and getattr(self, "img_size", 0):
            h = w = self.img_size
        if not (h and w):
            if len(input_shapes) < 2 or len(input_shapes[1]) < 4:
                raise self.error("has no img_h/img_w (or img_size) and no image input to take the size from")
            h, w = input_shapes[1][2], input_shapes[1][3]
        return float(h), float(w)

    def _steps(self, img_h, img_w, fh, fw):
        if self.step_h and self.step_w:
            return self.step_h, self.step_w
        if self.step:
            return self.step, self.step
        return img_h / fh, img_w / fw

    def boxes_wh(self):
        """(num_priors, 2) box widths and heights in pixels."""
        raise NotImplementedError

    def forward(self, inputs):
        shapes = tuple(x.shape for x in inputs)
        if self._cache_key != shapes:
            fh, fw = shapes[0][2], shapes[0][3]
            img_h, img_w = self._image_size(shapes)
            step_h, step_w = self._steps(img_h, img_w, fh, fw)
            cy = (np.arange(fh, dtype=np.float64) + self.offset) * step_h
            cx = (np.arange(fw, dtype=np.float64) + self.offset) * step_w
            wh = self.boxes_wh()
            half_w = wh[:, 0] / 2.0
            half_h = wh[:, 1] / 2.0
            boxes = np.empty((fh, fw, len(wh), 4), np.float64)
            boxes[..., 0] = (cx[None, :, None] - half_w) / img_w
            boxes[..., 1] = (cy[:, None, None] - half_h) / img_h
            boxes[..., 2] = (cx[None, :, None] + half_w) / img_w
            boxes[..., 3] = (cy[:, None, None] + half_h) / img_h
            if self.clip:
                np.clip(boxes, 0.0, 1.0, out=boxes)
            out = np.empty((1, 2, boxes.size), np.float32)
            out[0, 0] = boxes.ravel()
            out[0, 1] = np.tile(np.asarray(self.variance, np.float32), boxes.size // 4)
            self._cached = out
            self._cache_key = shapes
        return [self._cached.copy()]


@register("PriorBox")
class PriorBox(_PriorBase):
    def __init__(self, layer):
        super().__init__(layer)
        self._common()
        a = self.attrs
        self.min_size = a["min_size"]
        self.max_size = a["max_size"] or []
        self.aspect_ratio = a["aspect_ratio"] or []
        self.flip, self.img_size, self.scale_all_sizes = a["flip"], a["img_size"], a["scale_all_sizes"]
        if not self.min_size or min(self.min_size) <= 0:
            raise self.error(f"min_size {self.min_size} must list positive sizes")
        if not self.scale_all_sizes:
            self.max_size = []
        if self.max_size and len(self.max_size) != len(self.min_size):
            raise self.error(f"has {len(self.max_size)} max_size values for {len(self.min_size)} min_size values")

    def boxes_wh(self):
        sizes = prior_box_sizes(self.min_size, self.max_size, self.aspect_ratio, self.flip, self.scale_all_sizes)
        return np.asarray(sizes, np.float64)

    def num_priors(self):
        return len(self.boxes_wh())


@register("PriorBoxClustered")
class PriorBoxClustered(_PriorBase):
    def __init__(self, layer):
        super().__init__(layer)
        self._common()
        self.widths = self.attrs["width"]
        self.heights = self.attrs["height"]
        if len(self.widths) != len(self.heights) or not self.widths:
            raise self.error(f"needs as many widths as heights (got {len(self.widths)} and {len(self.heights)})")

    def boxes_wh(self):
        return np.stack([np.asarray(self.widths, np.float64), np.asarray(self.heights, np.float64)], axis=1)

    def num_priors(self):
        return len(self.widths)


# --- DetectionOutput ------------------------------------------------------------------
def jaccard(box, boxes):
    """Caffe's normalized JaccardOverlap of one box (4,) with boxes (K, 4)."""
    iw = np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0])
    ih = np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1])
    inter = np.where((iw > 0) & (ih > 0), iw * ih, 0)

    def size(b):
        w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
        return np.where((w < 0) | (h < 0), 0, w * h)
    union = size(box) + size(boxes) - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(inter > 0, inter / union, 0)


def nms_fast(boxes, scores, threshold, nms_threshold, eta, top_k):
    """Indices kept by SSD's ApplyNMSFast, best first, of one class (the adaptive
    eta < 1 needs this sequential form; nms_classes does eta 1 for all classes)."""
    order = _candidates(scores, threshold, top_k)
    keep = []
    if eta >= 1:
        while order.size:
            i = order[0]
            keep.append(i)
            rest = order[1:]
            order = rest[jaccard(boxes[i], boxes[rest]) <= nms_threshold]
        return keep
    adaptive = nms_threshold
    for i in order:
        if not keep or np.all(jaccard(boxes[i], boxes[keep]) <= adaptive):
            keep.append(i)
            if adaptive > 0.5:
                adaptive *= eta
    return keep


def _candidates(scores, threshold, top_k):
    """Indices with score > threshold, best first (ties: lower index first, Caffe's
    stable sort), at most top_k (-1: all)."""
    order = np.flatnonzero(scores > threshold)
    if top_k == 0:
        return order[:0]
    if -1 < top_k < order.size:
        # only the top_k best need sorting: everything >= the top_k-th score (ties kept)
        kth = np.partition(scores[order], order.size - top_k)[order.size - top_k]
        order = order[scores[order] >= kth]
    order = order[np.argsort(-scores[order], kind="stable")]
    return order[:top_k] if top_k > -1 else order


NMS_BLOCK_ELEMENTS = 1 << 17  # pair overlaps computed at a time: a block's arrays stay in the cache


def nms_classes(boxes, scores, threshold, nms_threshold, top_k):
    """ApplyNMSFast (eta 1) of every class at once: boxes (C, P, 4) (or (1, P, 4)
    shared by all classes), scores (C, P) -> per class the kept indices, best first.
    The same greedy rule as nms_fast (a candidate is kept unless a kept, better one
    overlaps it by more than nms_threshold, the overlaps computed as jaccard does, so
    the result is identical) without a Python loop per kept box and class: the
    candidates of all classes side by side, their pair overlaps computed a block of
    ranks at a time (only pairs of a better with a worse candidate), each block's
    ranks decided in order, then the worse ranks they suppress in one step."""
    classes = scores.shape[0]
    orders = [_candidates(scores[c], threshold, top_k) for c in range(classes)]
    k = max((o.size for o in orders), default=0)
    if k == 0:
        return orders
    index = np.zeros((classes, k), np.int64)
    alive = np.zeros((classes, k), bool)  # a candidate not suppressed by a kept, better one
    for c, order in enumerate(orders):
        index[c, :order.size] = order
        alive[c, :order.size] = True
    source = np.arange(classes) if boxes.shape[0] > 1 else np.zeros(classes, np.int64)
    cand = boxes[source[:, None], index].astype(np.float32, copy=False)  # (C, K, 4), best first
    x1, y1, x2, y2 = (np.ascontiguousarray(cand[..., i]) for i in range(4))
    w, h = x2 - x1, y2 - y1
    size = np.where((w < 0) | (h < 0), np.float32(0), w * h)
    block = max(8, NMS_BLOCK_ELEMENTS // (classes * k))
    for b in range(0, k, block):
        e = min(k, b + block)
        rows, cols = slice(b, e), slice(b + 1, k)  # ranks b..e-1 against every worse rank
        iw = np.minimum(x2[:, rows, None], x2[:, None, cols])
        iw -= np.maximum(x1[:, rows, None], x1[:, None, cols])
        ih = np.minimum(y2[:, rows, None], y2[:, None, cols])
        ih -= np.maximum(y1[:, rows, None], y1[:, None, cols])
        np.maximum(iw, 0, out=iw)
        np.maximum(ih, 0, out=ih)
        inter = np.multiply(iw, ih, out=iw)
        union = size[:, rows, None] + size[:, None, cols]
        union -= inter
        np.divide(inter, union, out=inter, where=inter > 0)  # else 0: no intersection
        over = inter > nms_threshold  # over[:, i - b, j - b - 1]: rank i overlaps the worse rank j
        for i in range(b, e - 1):  # this block's ranks, in order
            alive[:, i + 1:e] &= ~(over[:, i - b, i - b:e - b - 1] & alive[:, i, None])
        if e < k:  # what the block's kept candidates suppress further down
            alive[:, e:] &= ~np.any(over[:, :, e - b - 1:] & alive[:, rows, None], axis=1)
    return [index[c][alive[c]] for c in range(classes)]


@register("DetectionOutput")
class DetectionOutput(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.num_classes, self.share_location = a["num_classes"], a["share_location"]
        self.background, self.nms_threshold, self.top_k, self.eta = (
            a["background_label_id"], a["nms_threshold"], a["top_k"], a["eta"])
        self.code_type = a["code_type"].rsplit(".", 1)[-1].lower()  # corner, center_size, corner_size
        self.variance_in_target = a["variance_encoded_in_target"]
        self.keep_top_k, self.confidence_threshold = a["keep_top_k"], a["confidence_threshold"]
        self.clip_before_nms, self.clip_after_nms = a["clip_before_nms"], a["clip_after_nms"]
        self.drop_empty_boxes = a["drop_empty_boxes"]
        # normalized: false (R-FCN): priors are [batch, x1, y1, x2, y2] in pixels of input_width x input_height
        self.prior_size = 4 if a["normalized"] else 5
        self.pixel_scale = None if a["normalized"] else np.array(
            [a["input_width"], a["input_height"], a["input_width"], a["input_height"]], np.float64)
        if not 0 < self.eta <= 1:
            raise self.error(f"eta {self.eta} must be in (0, 1]")
        self.labels = np.array([label for label in range(self.num_classes) if label != self.background], np.int64)
        self._native = None

    def accelerate(self):
        """Its C variant (native/detection_output.c: decoding, NMS and the rows)."""
        from ..native import detection_output
        detection_output.load()
        self._native = detection_output.detection_output
        return "native"

    def _nms(self, boxes, scores):
        """Per class (row of scores) the kept prior indices, best first."""
        if self.eta >= 1:
            return nms_classes(boxes, scores, self.confidence_threshold, self.nms_threshold, self.top_k)
        return [np.asarray(nms_fast(boxes[r if len(boxes) > 1 else 0], scores[r], self.confidence_threshold,
                                    self.nms_threshold, self.eta, self.top_k), np.int64)
                for r in range(len(scores))]

    def _keep(self, priors):
        if self.keep_top_k > 0:
            return self.keep_top_k
        if self.top_k > 0:
            return self.top_k
        return priors * self.num_classes

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, (3, 5))
        loc, conf, prior = input_shapes[:3]
        n = loc[0]
        if prior[-1] % self.prior_size:
            raise self.error(f"the priors input {list(prior)} does not hold {self.prior_size}-value priors")
        priors = prior[-1] // self.prior_size
        loc_classes = 1 if self.share_location else self.num_classes
        if int(np.prod(loc[1:])) != priors * loc_classes * 4:
            raise self.error(f"{int(np.prod(loc[1:]))} location values per image do not match {priors} priors")
        if int(np.prod(conf[1:])) != priors * self.num_classes:
            raise self.error(f"{int(np.prod(conf[1:]))} confidences per image do not match {priors} priors x "
                             f"{self.num_classes} classes")
        return [(1, 1, n * self._keep(priors), 7)]

    def _decode(self, loc, prior_boxes, variances):
        """loc (..., P, 4) offsets -> corner boxes, Caffe DecodeBBox."""
        p, var = prior_boxes, variances
        if self.code_type == "corner":
            return p + var * loc
        pw = p[:, 2] - p[:, 0]
        ph = p[:, 3] - p[:, 1]
        if self.code_type == "corner_size":
            size = np.stack([pw, ph, pw, ph], axis=1)
            return p + var * loc * size
        pcx = (p[:, 0] + p[:, 2]) / 2.0
        pcy = (p[:, 1] + p[:, 3]) / 2.0
        cx = var[:, 0] * loc[..., 0] * pw + pcx
        cy = var[:, 1] * loc[..., 1] * ph + pcy
        w = np.exp(var[:, 2] * loc[..., 2]) * pw
        h = np.exp(var[:, 3] * loc[..., 3]) * ph
        return np.stack([cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0], axis=-1)

    def forward(self, inputs):
        loc_in, conf_in, prior_in = inputs[:3]
        n = loc_in.shape[0]
        size = self.prior_size
        priors = prior_in.shape[-1] // size
        c = self.num_classes
        loc_classes = 1 if self.share_location else c
        prior_flat = prior_in.reshape(-1)
        if not self.variance_in_target and prior_flat.size < priors * (size + 4):
            raise self.error("the prior input has no variances and variance_encoded_in_target is 0")
        # (variance_encoded_in_target: the offsets come scaled, whatever the prior input holds is not used)
        variances = None if self.variance_in_target else prior_flat[priors * size:priors * (size + 4)]
        keep_rows = self._keep(priors)
        labels = self.labels
        if self._native is not None:
            return [self._native(loc_in, conf_in, prior_flat[:priors * size], variances, n, loc_classes,
                                 n * keep_rows, self)]
        prior_boxes = prior_flat[:priors * size].reshape(priors, size)[:, size - 4:].astype(np.float64)
        if self.pixel_scale is not None:
            prior_boxes = prior_boxes / self.pixel_scale  # decoded boxes come out normalized
        variances = np.ones((priors, 4)) if variances is None else variances.reshape(priors, 4).astype(np.float64)
        loc = loc_in.reshape(n, priors, loc_classes, 4).astype(np.float64)
        conf = conf_in.reshape(n, priors, c)
        out = np.zeros((1, 1, n * keep_rows, 7), np.float32)
        rows = []
        for i in range(n):
            decoded = self._decode(loc[i].transpose(1, 0, 2), prior_boxes, variances).astype(np.float32)
            if self.clip_before_nms:
                np.clip(decoded, 0.0, 1.0, out=decoded)
            boxes = decoded if self.share_location else decoded[labels]
            scores = np.ascontiguousarray(conf[i].T[labels])  # (classes, priors)
            kept = self._nms(boxes, scores)
            row_of = np.repeat(np.arange(len(labels)), [k.size for k in kept])  # by label, then score
            idx = np.concatenate(kept) if kept else np.zeros(0, np.int64)
            picked_scores = scores[row_of, idx]
            box = boxes[row_of if len(boxes) > 1 else np.zeros_like(row_of), idx]
            if self.clip_after_nms:
                box = np.clip(box, 0.0, 1.0)
            if self.drop_empty_boxes:  # before the keep_top_k cut, as the TF Object Detection API
                has_area = (box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1]) > 0
                row_of, idx, picked_scores, box = (v[has_area] for v in (row_of, idx, picked_scores, box))
            if -1 < self.keep_top_k < idx.size:
                best = np.argsort(-picked_scores, kind="stable")[:self.keep_top_k]
                best = best[np.argsort(row_of[best], kind="stable")]  # back to label order
                row_of, idx, picked_scores, box = (v[best] for v in (row_of, idx, picked_scores, box))
            rows.append(np.column_stack([np.full(idx.size, i, np.float32), labels[row_of].astype(np.float32),
                                         picked_scores, box]))
        rows = np.concatenate(rows).astype(np.float32, copy=False) if rows else np.zeros((0, 7), np.float32)
        rows = rows[:n * keep_rows]
        out[0, 0, :len(rows)] = rows
        if len(rows) < out.shape[2]:
            out[0, 0, len(rows), 0] = -1  # the end marker, then zeros (as OpenVINO writes it)
        return [out]


# --- Proposal / SimplerNMS -------------------------------------------------------------
def _iou_pixels(box, boxes):
    """IoU with +1 pixel areas (Faster R-CNN)."""
    x1 = np.maximum(box[0], boxes[:, 0])
    y1 = np.maximum(box[1], boxes[:, 1])
    x2 = np.minimum(box[2], boxes[:, 2])
    y2 = np.minimum(box[3], boxes[:, 3])
    inter = np.maximum(0, x2 - x1 + 1) * np.maximum(0, y2 - y1 + 1)
    disjoint = (box[0] > boxes[:, 2]) | (box[1] > boxes[:, 3]) | (box[2] < boxes[:, 0]) | (box[3] < boxes[:, 1])
    inter = np.where(disjoint, 0, inter)
    area_a = (box[2] - box[0] + 1) * (box[3] - box[1] + 1)
    area_b = (boxes[:, 2] - boxes[:, 0] + 1) * (boxes[:, 3] - boxes[:, 1] + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return inter / (area_a + area_b - inter)


def _greedy_nms(boxes, threshold, max_out):
    """Indices (into boxes, already sorted best first) surviving greedy NMS."""
    order = np.arange(len(boxes))
    keep = []
    while order.size and len(keep) < max_out:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        order = rest[~(_iou_pixels(boxes[i], boxes[rest]) > threshold)]
    return keep


@register("Proposal")
class Proposal(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.base_size, self.feat_stride, self.min_size = a["base_size"], a["feat_stride"], a["min_size"]
        self.nms_thresh, self.pre_nms_topn, self.post_nms_topn = a["nms_thresh"], a["pre_nms_topn"], a["post_nms_topn"]
        self.ratio, self.scale = a["ratio"], a["scale"]
        if not self.ratio or not self.scale:
            raise self.error("needs non-empty ratio and scale lists")
        self.anchors = proposal_anchors(self.base_size, self.ratio, self.scale)

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 3)
        scores, deltas = input_shapes[0], input_shapes[1]
        a = len(self.anchors)
        if len(scores) != 4 or scores[1] != 2 * a or tuple(deltas) != (scores[0], 4 * a, scores[2], scores[3]):
            raise self.error(f"inputs {list(scores)} and {list(deltas)} do not match {a} anchors (needs "
                             f"[N, {2 * a}, H, W] scores and [N, {4 * a}, H, W] deltas)")
        return [(scores[0] * self.post_nms_topn, 5)]

    def forward(self, inputs):
        """OpenVINO's Proposal (framework caffe): each image's ROIs fill its own
        post_nms_topn rows; fewer than that end with a row whose batch index is -1,
        then zeros (ROIPooling/PSROIPooling stop at it)."""
        scores_in, deltas_in, info = inputs
        n, _, h, w = scores_in.shape
        a = len(self.anchors)
        f32 = np.float32
        info = info.reshape(-1)
        img_h, img_w = f32(info[0]), f32(info[1])
        # the minimum size scales with the image: [2] for height, [3] for width where given
        scale_h = f32(info[2]) if info.size > 2 else f32(1)
        scale_w = f32(info[3]) if info.size > 3 else scale_h
        min_h, min_w = f32(self.min_size) * scale_h, f32(self.min_size) * scale_w
        post = self.post_nms_topn
        out = np.zeros((n * post, 5), np.float32)
        shift_y, shift_x = np.meshgrid(np.arange(h, dtype=np.float32) * self.feat_stride,
                                       np.arange(w, dtype=np.float32) * self.feat_stride, indexing="ij")
        for i in range(n):
            # proposals in (h, w, anchor) order
            boxes = np.empty((h, w, a, 4), np.float32)
            boxes[..., 0] = shift_x[..., None] + self.anchors[:, 0]
            boxes[..., 1] = shift_y[..., None] + self.anchors[:, 1]
            boxes[..., 2] = shift_x[..., None] + self.anchors[:, 2]
            boxes[..., 3] = shift_y[..., None] + self.anchors[:, 3]
            d = deltas_in[i].reshape(a, 4, h, w).transpose(2, 3, 0, 1)  # (h, w, a, 4)
            bw = boxes[..., 2] - boxes[..., 0] + f32(1)
            bh = boxes[..., 3] - boxes[..., 1] + f32(1)
            cx = boxes[..., 0] + f32(0.5) * bw
            cy = boxes[..., 1] + f32(0.5) * bh
            pcx = d[..., 0] * bw + cx
            pcy = d[..., 1] * bh + cy
            pw = np.exp(d[..., 2]) * bw
            ph = np.exp(d[..., 3]) * bh
            x1 = np.clip(pcx - f32(0.5) * pw, 0, img_w - 1)
            y1 = np.clip(pcy - f32(0.5) * ph, 0, img_h - 1)
            x2 = np.clip(pcx + f32(0.5) * pw, 0, img_w - 1)
            y2 = np.clip(pcy + f32(0.5) * ph, 0, img_h - 1)
            ok = ((x2 - x1 + f32(1)) >= min_w) & ((y2 - y1 + f32(1)) >= min_h)
            score = scores_in[i, a:].transpose(1, 2, 0) * ok  # (h, w, a)
            props = np.stack([x1, y1, x2, y2], axis=-1).reshape(-1, 4)
            score = score.reshape(-1)
            order = np.argsort(-score, kind="stable")[:min(len(score), self.pre_nms_topn)]
            keep = _greedy_nms(props[order], self.nms_thresh, post)
            k, row = len(keep), i * post
            out[row:row + k, 0] = i
            out[row:row + k, 1:] = props[order[keep]]
            if k < post:
                out[row + k, 0] = -1
        return [out]


@register("SimplerNMS")
class SimplerNMS(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        a = self.attrs
        self.min_bbox_size, self.feat_stride = a["min_bbox_size"], a["feat_stride"]
        self.pre_nms_topn, self.post_nms_topn = a["pre_nms_topn"], a["post_nms_topn"]
        self.iou_threshold, self.scale = a["iou_threshold"], a["scale"]
        if not self.scale:
            raise self.error("needs a non-empty scale list")
        # the standard anchors of a 16-pixel base at ratios 0.5, 1, 2 (Faster R-CNN's)
        self.anchors = proposal_anchors(16, (0.5, 1.0, 2.0), self.scale)

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 3)
        a = len(self.anchors)
        cls, delta = sorted(input_shapes[:2], key=lambda s: s[1])
        if len(cls) != 4 or cls[1] != 2 * a or delta[1] != 4 * a or tuple(cls[2:]) != tuple(delta[2:]):
            raise self.error(f"inputs {list(input_shapes[0])} and {list(input_shapes[1])} do not match {a} anchors")
        return [(self.post_nms_topn, 5)]

    def forward(self, inputs):
        cls, delta, info = inputs
        if cls.shape[1] > delta.shape[1]:
            cls, delta = delta, cls
        a = len(self.anchors)
        _, _, h, w = cls.shape
        info = info.reshape(-1)
        img_h, img_w, img_scale = int(info[0]), int(info[1]), int(info[2]) if info.size > 2 else 1
        f32 = np.float32
        anchors = self.anchors
        aw = anchors[:, 2] - anchors[:, 0] + 1
        ah = anchors[:, 3] - anchors[:, 1] + 1
        acx = anchors[:, 0] + aw * f32(0.5)
        acy = anchors[:, 1] + ah * f32(0.5)
        sy = (np.arange(h) * self.feat_stride).astype(np.float32)[:, None, None]
        sx = (np.arange(w) * self.feat_stride).astype(np.float32)[None, :, None]
        d = delta[0].reshape(a, 4, h, w).transpose(2, 3, 0, 1)  # (h, w, a, 4)
        pcx = d[..., 0] * aw + acx + sx
        pcy = d[..., 1] * ah + acy + sy
        hw = np.exp(d[..., 2]) * aw * f32(0.5)
        hh = np.exp(d[..., 3]) * ah * f32(0.5)
        x0 = np.clip(pcx - hw, 0, img_w - 1)
        y0 = np.clip(pcy - hh, 0, img_h - 1)
        x1 = np.clip(pcx + hw, 0, img_w - 1)
        y1 = np.clip(pcy + hh, 0, img_h - 1)
        min_size = self.min_bbox_size * img_scale
        ok = ((np.trunc(x1 - x0) + 1 >= min_size) & (np.trunc(y1 - y0) + 1 >= min_size)).reshape(-1)
        boxes = np.stack([x0, y0, x1, y1], axis=-1).reshape(-1, 4)[ok]
        scores = cls[0, a:].transpose(1, 2, 0).reshape(-1)[ok]
        # by score, ties: the later proposal first
        order = np.lexsort((-np.arange(len(scores)), -scores))[:self.pre_nms_topn]
        boxes, scores = boxes[order], scores[order]
        boxes = boxes[scores > 0]
        keep = []
        areas = np.maximum(0, boxes[:, 3] - boxes[:, 1] + 1) * np.maximum(0, boxes[:, 2] - boxes[:, 0] + 1)
        for i in range(len(boxes)):
            if keep:
                kb = boxes[keep]
                iw = np.maximum(0, np.minimum(kb[:, 2], boxes[i, 2]) - np.maximum(kb[:, 0], boxes[i, 0]) + 1)
                ih = np.maximum(0, np.minimum(kb[:, 3], boxes[i, 3]) - np.maximum(kb[:, 1], boxes[i, 1]) + 1)
                inter = iw * ih
                union = areas[keep] + areas[i] - inter
                if np.any(inter > self.iou_threshold * union):
                    continue
            keep.append(i)
            if len(keep) == self.post_nms_topn:
                break
        out = np.zeros((self.post_nms_topn, 5), np.float32)
        out[:len(keep), 1:] = boxes[keep]
        return [out]
