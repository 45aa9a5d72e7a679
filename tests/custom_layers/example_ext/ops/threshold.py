"""Extension op for Caffe's Threshold (x > t ? 1 : 0)."""
from core.ops.op import Op


class ThresholdOp(Op):
    op = "Threshold"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Threshold", "op": "Threshold", "infer": ThresholdOp.infer}, attrs)

    def supported_attrs(self):
        return ["threshold"]

    @staticmethod
    def infer(node):
        node.out_node(0).shape = node.in_node(0).shape.copy()
