"""Pad (own type; the IR v2 catalog pads only inside Convolution and Pooling).

Attributes: `pads_begin`, `pads_end` (values added before/after each axis, IR
layout), `pad_mode` (constant: `pad_value`; reflect: mirror without the edge;
symmetric: mirror with the edge), `pad_value`. Front ends fold a zero padding
into the convolution (or pooling) after it where that is exact.
"""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs

PAD_MODES = ("constant", "reflect", "symmetric")


class Pad(Op):
    op = "Pad"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Pad", "op": self.op, "pad_mode": "constant", "pad_value": 0.0,
                                 "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Pad", pad_value=lambda n: float(n.pad_value) if n.pad_mode == "constant" else None)

    @staticmethod
    def infer(node):
        shape = np.array(node.in_node(0).shape, dtype=np.int64)
        begin, end = (np.asarray(node[a], dtype=np.int64) for a in ("pads_begin", "pads_end"))
        if len(begin) != len(shape) or len(end) != len(shape) or begin.min(initial=0) < 0 or end.min(initial=0) < 0:
            raise ShapeError("Pad '{}': pads {} / {} do not fit a {}-D input.", node.name, list(begin), list(end),
                             len(shape))
        if node.pad_mode not in PAD_MODES:
            raise ShapeError("Pad '{}': mode '{}' is not one of {}.", node.name, node.pad_mode, ", ".join(PAD_MODES))
        limit = shape - (1 if node.pad_mode == "reflect" else 0)
        if node.pad_mode != "constant" and (np.any(begin > limit) or np.any(end > limit)):
            raise ShapeError("Pad '{}': {} padding of {} / {} is larger than the input {} allows.", node.name,
                             node.pad_mode, list(begin), list(end), list(shape))
        node.out_node(0).shape = shape + begin + end
