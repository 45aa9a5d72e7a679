"""Interpolate (own type): TensorFlow's image resizing, where the catalog's Resample
does not compute the same thing.

Attributes: `mode` (nearest | linear | cubic), `align_corners`, `half_pixel_centers`
(TensorFlow's flags, both 0: TensorFlow's legacy "asymmetric" coordinates),
`height`, `width` (the output size). Source coordinate of output index i, in
float32 as TensorFlow computes it: align_corners: i * (in - 1) / (out - 1);
half_pixel_centers: (i + 0.5) * in / out - 0.5 for linear, (i + 0.5) * in / out for
nearest; else i * in / out. Nearest takes floor (round with align_corners), linear
blends the two neighbours (clamped to the image), cubic is TensorFlow's
resize_bicubic (ir/cubic.py). The half-pixel linear case is the catalog's Resample
LINEAR, which front ends use instead.
"""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs


class Interpolate(Op):
    op = "Interpolate"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Interpolate", "op": self.op, "align_corners": False,
                                 "half_pixel_centers": False, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Interpolate")

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        if len(shape) != 4 or node.mode not in ("nearest", "linear", "cubic") or int(node.height) <= 0 \
                or int(node.width) <= 0:
            raise ShapeError("Interpolate '{}': needs a 4-D input, mode nearest, linear or cubic and a positive size "
                             "(got {}, {}, {}x{}).", node.name, list(shape), node.mode, node.height, node.width)
        node.out_node(0).shape = np.array([shape[0], shape[1], int(node.height), int(node.width)], dtype=np.int64)
