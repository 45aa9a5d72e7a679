"""Resizing: Resample (nearest/linear by a factor or to a size) and Interp (PSPNet)."""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, check_ranges, ir_attrs
from ir.interp import ZOOM_RULES, interp_output_size


class Resample(Op):
    op = "Resample"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Resample", "op": self.op, "antialias": False, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Resample", type=lambda n: n.resample_type)

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        if node.soft_get("height") and node.soft_get("width"):
            h, w = int(node.height), int(node.width)
        else:
            f = float(node.factor)
            h, w = int(shape[2] * f), int(shape[3] * f)
            node.height, node.width = h, w
        node.out_node(0).shape = np.array([shape[0], shape[1], h, w], dtype=np.int64)


class Interp(Op):
    """Caffe Interp (PSPNet/DeepLab fork): bilinear resize with corners aligned; the
    output size rules are in ir/interp.py (shared with the kernels)."""
    op = "Interp"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Interp", "op": self.op, "zoom_factor": 1, "shrink_factor": 1,
                                 "pad_beg": 0, "pad_end": 0, "height": 0, "width": 0, "zoom_rule": "multiply",
                                 "align_corners": True, "infer": self.infer}, attrs)

    def backend_attrs(self):
        # the rule only matters (and is only written) when the layer zooms
        return ir_attrs("Interp", zoom_rule=lambda n: n.zoom_rule if int(n.zoom_factor) != 1 else None)

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        if len(shape) != 4:
            raise ShapeError("Interp '{}' needs a 4-D input, got shape {}.", node.name, list(shape))
        check_ranges(node, "Interp", ("height", "width", "zoom_factor", "shrink_factor", "pad_beg", "pad_end"))
        if len(node.data_inputs()) > 1:  # the size of the second input
            ref = node.in_node(1).shape
            h, w = int(ref[2]), int(ref[3])
        else:
            try:
                h, w = interp_output_size(
                    int(shape[2]), int(shape[3]), height=int(node.height), width=int(node.width),
                    zoom_factor=int(node.zoom_factor), shrink_factor=int(node.shrink_factor),
                    pad_beg=int(node.pad_beg), pad_end=int(node.pad_end), zoom_rule=node.zoom_rule)
            except ValueError as exc:
                raise ShapeError("Interp '{}' on an input of shape {}: {}.", node.name, list(shape), exc,
                                 faq=96) from None
        node.out_node(0).shape = np.array([shape[0], shape[1], h, w], dtype=np.int64)


def zoom_rule_hint(node) -> str:
    """A shape mismatch right after a zooming Interp usually means the model was
    trained with the other zoom rule (reference FAQ #96): say so."""
    for data in node.data_inputs():
        producer = data.producer()
        if producer is None or producer.soft_get("op") != "Interp" or producer.soft_get("zoom_factor", 1) == 1:
            continue
        rule = producer.soft_get("zoom_rule")
        if rule in ZOOM_RULES:
            other = next(r for r in ZOOM_RULES if r != rule)
            return (" Input '{}' comes from an Interp with zoom_factor {} sized by the '{}' rule: if the model was "
                    "trained with the other rule, convert with --interp_zoom_rule {} (FAQ #96).".format(
                        data.name, producer.zoom_factor, rule, other))
    return ""
