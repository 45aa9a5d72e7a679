"""Pairing detections: TensorFlow's (detection_boxes/scores/classes, y-first) and a
DetectionOutput's [1, 1, N, 7] rows (x-first, normalized)."""
from __future__ import annotations

import numpy as np

THRESHOLD = 0.3
SCORE_TOL = 1e-3
BOX_TOL = 1e-3     # of the image size: boxes are normalized


def tf_detections(out) -> list[tuple]:
    """[(class, score, xmin, ymin, xmax, ymax)] of a TensorFlow export's outputs."""
    n = int(out["num_detections"][0])
    boxes, scores, classes = out["detection_boxes"][0], out["detection_scores"][0], out["detection_classes"][0]
    return [(int(classes[i]), float(scores[i]), *map(float, boxes[i][[1, 0, 3, 2]])) for i in range(n)]


def ir_detections(rows: np.ndarray) -> list[tuple]:
    rows = np.asarray(rows).reshape(-1, 7)
    rows = rows[rows[:, 0] >= 0]
    return [(int(r[1]), float(r[2]), *map(float, r[3:])) for r in rows]


def unpaired(ours: list[tuple], theirs: list[tuple]) -> list[str]:
    """Every detection above THRESHOLD on either side paired with one of the other side
    (same class, score within SCORE_TOL, each box coordinate within BOX_TOL); the problems."""
    problems = []
    for side, left, right in (("TensorFlow", theirs, ours), ("mo-core", ours, theirs)):
        used = set()
        for det in sorted(left, key=lambda d: -d[1]):
            if det[1] <= THRESHOLD:
                continue
            match = next((j for j, other in enumerate(right) if j not in used and other[0] == det[0]
                          and abs(other[1] - det[1]) <= SCORE_TOL
                          and max(abs(a - b) for a, b in zip(other[2:], det[2:])) <= BOX_TOL), None)
            if match is None:
                problems.append("{} detection {} has no pair".format(side, tuple(round(v, 5) for v in det)))
            else:
                used.add(match)
    return problems
