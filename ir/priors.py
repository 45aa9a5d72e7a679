"""Prior boxes and anchors (PriorBox, Proposal): semantics shared by the
producers (core, the IR v11 emitter) and consumers (daemons) of IR."""

import math

import numpy as np


def prior_box_aspect_ratios(aspect_ratio, flip) -> list[float]:
    """SSD's list of ratios: 1, then each new ratio (and its inverse when flipping)."""
    ratios = [1.0]
    for ar in aspect_ratio:
        if any(abs(ar - r) < 1e-6 for r in ratios):
            continue
        ratios.append(float(ar))
        if flip:
            ratios.append(1.0 / float(ar))
    return ratios


def prior_box_sizes(min_size, max_size, aspect_ratio, flip, scale_all_sizes=True) -> list[tuple[float, float]]:
    """(width, height) in pixels of Caffe PriorBox's boxes at one position, in its
    order: per min size the square box, the sqrt(min * max) box, then the other
    ratios (with scale_all_sizes off: max sizes are ignored and the ratio boxes of
    the first min size come once, after the last min size)."""
    ratios = prior_box_aspect_ratios(aspect_ratio, flip)
    max_size = list(max_size) if scale_all_sizes else []
    sizes = []
    last = len(min_size) - 1
    for i, s in enumerate(min_size):
        sizes.append((float(s), float(s)))
        if max_size:
            side = math.sqrt(s * max_size[i])
            sizes.append((side, side))
        if scale_all_sizes or i == last:
            base = s if scale_all_sizes else min_size[0]
            for ar in ratios:
                if abs(ar - 1.0) < 1e-6:
                    continue
                sizes.append((base * math.sqrt(ar), base / math.sqrt(ar)))
    return sizes


def round_half_away(x):
    """C's roundf: halves away from zero (numpy's round goes to the even neighbour)."""
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def proposal_anchors(base_size, ratios, scales) -> np.ndarray:
    """(len(ratios) * len(scales), 4) float32 anchor boxes [x1, y1, x2, y2] of the
    Faster R-CNN / R-FCN Proposal layer, per ratio per scale, around the centre of a
    base_size square, as py-faster-rcnn's generate_anchors, the Inference Engine's
    Proposal spec and OpenVINO make them: the ratio's sides are rounded
    (w = round(sqrt(b*b / r)), h = round(w * r)), then scaled, half sizes
    0.5 * (side * scale - 1). Computed in float32 with C's roundf, as OpenVINO does."""
    f32 = np.float32
    area = f32(base_size) * f32(base_size)
    center = f32(0.5) * (f32(base_size) - f32(1))
    anchors = []
    for r in ratios:
        rw = f32(round_half_away(np.sqrt(area / f32(r), dtype=f32)))
        rh = f32(round_half_away(rw * f32(r)))
        for s in scales:
            sw = f32(0.5) * (rw * f32(s) - f32(1))
            sh = f32(0.5) * (rh * f32(s) - f32(1))
            anchors.append((center - sw, center - sh, center + sw, center + sh))
    return np.asarray(anchors, np.float32).reshape(-1, 4)
