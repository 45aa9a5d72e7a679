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
        super().__init__(graph, {"type": "DetectionOutput", "op": self.op, "normalized": True, "input_width": 1,
                                 "input_height": 1, "infer": self.infer}, attrs)

    def backend_attrs(self):
        pixels = {name: (lambda key: lambda n: None if n.normalized else n[key])(name)
                  for name in ("input_width", "input_height")}
        # written only for the R-FCN form: an SSD IR stays as the catalog shows it
        return ir_attrs("DetectionOutput", normalized=lambda n: None if n.normalized else False, **pixels)

    @staticmethod
    def infer(node):
        loc, conf, prior = node.in_node(0).shape, node.in_node(1).shape, node.in_node(2).shape
        batch = int(loc[0])
        # normalized: [xmin, ymin, xmax, ymax] in [0, 1]; else R-FCN's ROIs [batch, x1, y1, x2, y2] in pixels
        prior_size = 4 if node.normalized else 5
        if not node.normalized and min(int(node.input_width), int(node.input_height)) <= 0:
            raise ShapeError("DetectionOutput '{}' has normalized: false but no positive input_width and "
                             "input_height (the image size its pixel boxes are divided by); add them to "
                             "detection_output_param.", node.name)
        if int(prior[-1]) % prior_size:
            raise ShapeError("DetectionOutput '{}': its priors input {} does not hold {}-value priors ({}).",
                             node.name, list(prior), prior_size, "normalized" if node.normalized else
                             "normalized: false, [batch, x1, y1, x2, y2] per prior")
        if not node.variance_encoded_in_target and (len(prior) < 2 or int(prior[-2]) < 2):
            raise ShapeError("DetectionOutput '{}': its priors input {} has no variances (a second row), and "
                             "variance_encoded_in_target is false. Set variance_encoded_in_target: true (R-FCN) "
                             "or feed PriorBox outputs.", node.name, list(prior))
        priors = int(prior[-1]) // prior_size
        loc_classes = 1 if node.share_location else int(node.num_classes)
        if int(np.prod(loc[1:])) != priors * loc_classes * 4:
            hint = ""
            if node.normalized and int(prior[-1]) % 5 == 0 and \
                    int(np.prod(loc[1:])) == int(prior[-1]) // 5 * loc_classes * 4:
                hint = (" They match {} priors of 5 values: if the priors are ROIs [batch, x1, y1, x2, y2] in pixels "
                        "(R-FCN), set normalized: false, input_width and input_height in detection_output_param."
                        .format(int(prior[-1]) // 5))
            raise ShapeError("DetectionOutput '{}': {} location values per image do not match {} priors.{}",
                             node.name, int(np.prod(loc[1:])), priors, hint)
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
