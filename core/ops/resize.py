"""Resizing: Resample (nearest/linear by a factor or to a size) and Interp (PSPNet)."""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs


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
    """Caffe Interp (PSPNet/DeepLab fork); its output size rules are the fork's."""
    op = "Interp"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Interp", "op": self.op, "zoom_factor": 1, "shrink_factor": 1,
                                 "pad_beg": 0, "pad_end": 0, "height": 0, "width": 0, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Interp")

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        h_in = int(shape[2]) + int(node.pad_beg) + int(node.pad_end)
        w_in = int(shape[3]) + int(node.pad_beg) + int(node.pad_end)
        zoom, shrink = int(node.zoom_factor), int(node.shrink_factor)
        if len(node.data_inputs()) > 1:
            ref = node.in_node(1).shape
            h, w = int(ref[2]), int(ref[3])
        elif node.height and node.width:
            h, w = int(node.height), int(node.width)
        elif shrink != 1 and zoom != 1:
            h, w = (h_in - 1) // shrink + 1, (w_in - 1) // shrink + 1
            h, w = h + (h - 1) * (zoom - 1), w + (w - 1) * (zoom - 1)
        elif zoom != 1:
            h, w = h_in + (h_in - 1) * (zoom - 1), w_in + (w_in - 1) * (zoom - 1)
        elif shrink != 1:
            h, w = (h_in - 1) // shrink + 1, (w_in - 1) // shrink + 1
        else:
            h, w = h_in, w_in
        if h <= 0 or w <= 0:
            raise ShapeError("Interp '{}' computes a non-positive output size {}x{}.", node.name, h, w)
        node.height, node.width = h, w
        node.out_node(0).shape = np.array([shape[0], shape[1], h, w], dtype=np.int64)
