"""SSD / Faster R-CNN heads: PriorBox, PriorBoxClustered, DetectionOutput, Proposal."""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs
from ir.priors import prior_box_aspect_ratios


def _priors_output(node, num_priors):
    shape = node.in_node(0).shape
    if len(shape) != 4:
        raise ShapeError("{} '{}' needs a 4-D feature map input, got {}.", node.op, node.name, list(shape))
    node.out_node(0).shape = np.array([1, 2, int(shape[2] * shape[3]) * num_priors * 4], dtype=np.int64)


class PriorBox(Op):
    op = "PriorBox"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "PriorBox", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("PriorBox")

    @staticmethod
    def infer(node):
        ratios = prior_box_aspect_ratios(node.aspect_ratio, node.flip)
        num = len(ratios) * len(node.min_size) + len(node.max_size)
        _priors_output(node, num)


class PriorBoxClustered(Op):
    op = "PriorBoxClustered"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "PriorBoxClustered", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("PriorBoxClustered")

    @staticmethod
    def infer(node):
        if len(node.width) != len(node.height) or not len(node.width):
            raise ShapeError("PriorBoxClustered '{}' needs as many widths as heights (got {} and {}).", node.name,
                             len(node.width), len(node.height))
        _priors_output(node, len(node.width))


class DetectionOutput(Op):
    """The IR shape is the upper bound [1, 1, N * keep_top_k, 7]; Caffe's own top
    is resized to the actual number of detections at run time."""
    op = "DetectionOutput"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "DetectionOutput", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("DetectionOutput")

    @staticmethod
    def infer(node):
        loc, conf = node.in_node(0).shape, node.in_node(1).shape
        batch = int(loc[0])
        priors = int(node.in_node(2).shape[-1]) // 4
        loc_classes = 1 if node.share_location else int(node.num_classes)
        if int(np.prod(loc[1:])) != priors * loc_classes * 4:
            raise ShapeError("DetectionOutput '{}': {} location values per image do not match {} priors.",
                             node.name, int(np.prod(loc[1:])), priors)
        if int(np.prod(conf[1:])) != priors * int(node.num_classes):
            raise ShapeError("DetectionOutput '{}': {} confidences per image do not match {} priors x {} classes.",
                             node.name, int(np.prod(conf[1:])), priors, node.num_classes)
        keep = int(node.keep_top_k) if int(node.keep_top_k) > 0 else int(node.top_k)
        if keep <= 0:
            keep = priors * int(node.num_classes)
        node.out_node(0).shape = np.array([1, 1, batch * keep, 7], dtype=np.int64)


class Proposal(Op):
    op = "Proposal"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Proposal", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Proposal")

    @staticmethod
    def infer(node):
        batch = int(node.in_node(0).shape[0])
        node.out_node(0).shape = np.array([batch * int(node.post_nms_topn), 5], dtype=np.int64)
