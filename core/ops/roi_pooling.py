"""ROIPooling and PSROIPooling: the first output dim is the number of ROIs."""
import numpy as np

from core.ops.op import Op, ir_attrs


class ROIPooling(Op):
    op = "ROIPooling"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "ROIPooling", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("ROIPooling")

    @staticmethod
    def infer(node):
        feat, rois = node.in_node(0).shape, node.in_node(1).shape
        if node.graph.graph.get("layout") == "NHWC":  # put into a TensorFlow graph (OD API CropAndResize)
            node.out_node(0).shape = np.array([rois[0], node.pooled_h, node.pooled_w, feat[-1]], dtype=np.int64)
            return
        node.out_node(0).shape = np.array([rois[0], feat[1], node.pooled_h, node.pooled_w], dtype=np.int64)


class PSROIPooling(Op):
    op = "PSROIPooling"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "PSROIPooling", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("PSROIPooling")

    @staticmethod
    def infer(node):
        rois = node.in_node(1).shape
        g = int(node.group_size)
        node.out_node(0).shape = np.array([rois[0], node.output_dim, g, g], dtype=np.int64)
