"""A Faster R-CNN style region proposal layer for pycaffe (a Caffe `Python` layer).

Bottoms: rpn_cls_prob_reshape (N, 2A, H, W), rpn_bbox_pred (N, 4A, H, W),
im_info (N, 3) = (height, width, scale). Top: rois (N * post_nms_topn, 5) rows
(batch index, x1, y1, x2, y2). Unlike the original, the output always has
post_nms_topn rows per image (the last kept box repeats when fewer survive), so
its shape does not depend on the data - as the IR's Proposal defines it.
param_str is a Python dict literal, e.g. "'feat_stride': 16".
"""
import ast

import numpy as np

import caffe


def make_anchors(base_size, ratios, scales):
    ctr = (base_size - 1) / 2.0
    anchors = []
    for r in ratios:
        w = np.round(np.sqrt(base_size * base_size / r))
        h = np.round(w * r)
        for s in scales:
            ws, hs = w * s, h * s
            anchors.append([ctr - (ws - 1) / 2, ctr - (hs - 1) / 2, ctr + (ws - 1) / 2, ctr + (hs - 1) / 2])
    return np.array(anchors, dtype=np.float32)


def apply_deltas(boxes, deltas):
    w = boxes[:, 2] - boxes[:, 0] + 1.0
    h = boxes[:, 3] - boxes[:, 1] + 1.0
    cx, cy = boxes[:, 0] + 0.5 * w, boxes[:, 1] + 0.5 * h
    dx, dy, dw, dh = deltas.T
    pcx, pcy = dx * w + cx, dy * h + cy
    pw, ph = np.exp(dw) * w, np.exp(dh) * h
    return np.stack([pcx - 0.5 * pw, pcy - 0.5 * ph, pcx + 0.5 * pw - 1, pcy + 0.5 * ph - 1], axis=1)


def nms(boxes, scores, thresh):
    order = np.argsort(-scores, kind="stable")
    areas = (boxes[:, 2] - boxes[:, 0] + 1) * (boxes[:, 3] - boxes[:, 1] + 1)
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        xx1 = np.maximum(boxes[i, 0], boxes[order[1:], 0])
        yy1 = np.maximum(boxes[i, 1], boxes[order[1:], 1])
        xx2 = np.minimum(boxes[i, 2], boxes[order[1:], 2])
        yy2 = np.minimum(boxes[i, 3], boxes[order[1:], 3])
        inter = np.maximum(0, xx2 - xx1 + 1) * np.maximum(0, yy2 - yy1 + 1)
        iou = inter / (areas[i] + areas[order[1:]] - inter)
        order = order[1:][iou <= thresh]
    return np.array(keep, dtype=np.int64)


def proposals(cls_prob, bbox_pred, im_info, p):
    anchors = make_anchors(p["base_size"], p["ratio"], p["scale"])
    a = anchors.shape[0]
    n, _, height, width = cls_prob.shape
    sx, sy = np.meshgrid(np.arange(width) * p["feat_stride"], np.arange(height) * p["feat_stride"])
    shifts = np.stack([sx.ravel(), sy.ravel(), sx.ravel(), sy.ravel()], axis=1).astype(np.float32)
    all_anchors = (anchors[None, :, :] + shifts[:, None, :]).reshape(-1, 4)
    rois = []
    for b in range(n):
        scores = cls_prob[b, a:].transpose(1, 2, 0).reshape(-1)
        deltas = bbox_pred[b].transpose(1, 2, 0).reshape(-1, 4)
        boxes = apply_deltas(all_anchors, deltas)
        boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0, im_info[b, 1] - 1)
        boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0, im_info[b, 0] - 1)
        min_size = p["min_size"] * im_info[b, 2]
        ok = ((boxes[:, 2] - boxes[:, 0] + 1) >= min_size) & ((boxes[:, 3] - boxes[:, 1] + 1) >= min_size)
        boxes, scores = boxes[ok], scores[ok]
        order = np.argsort(-scores, kind="stable")[: p["pre_nms_topn"]]
        boxes, scores = boxes[order], scores[order]
        keep = nms(boxes, scores, p["nms_thresh"])[: p["post_nms_topn"]]
        kept = boxes[keep] if keep.size else np.zeros((1, 4), np.float32)
        pad = np.repeat(kept[-1:], p["post_nms_topn"] - kept.shape[0], axis=0)
        kept = np.concatenate([kept, pad])
        rois.append(np.concatenate([np.full((kept.shape[0], 1), b, np.float32), kept], axis=1))
    return np.concatenate(rois).astype(np.float32)


DEFAULTS = {"feat_stride": 16, "base_size": 16, "min_size": 16, "ratio": [0.5, 1, 2], "scale": [8, 16, 32],
            "pre_nms_topn": 6000, "post_nms_topn": 300, "nms_thresh": 0.7}


class ProposalLayer(caffe.Layer):
    def setup(self, bottom, top):
        text = self.param_str.strip()
        given = ast.literal_eval(text if text.startswith("{") else "{" + text + "}") if text else {}
        self.p = dict(DEFAULTS, **given)

    def reshape(self, bottom, top):
        top[0].reshape(bottom[0].data.shape[0] * self.p["post_nms_topn"], 5)

    def forward(self, bottom, top):
        top[0].data[...] = proposals(bottom[0].data, bottom[1].data, bottom[2].data, self.p)

    def backward(self, top, propagate_down, bottom):
        pass
