"""CTCGreedyDecoder: [T, N, C] scores (+ [T, N] sequence indicators) -> [N, T, 1, 1]."""
import numpy as np

from core.ops.op import Op, ir_attrs


class CTCGreedyDecoder(Op):
    op = "CTCGreedyDecoder"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "CTCGreedyDecoder", "op": self.op, "ctc_merge_repeated": True,
                                 "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("CTCGreedyDecoder")

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        node.out_node(0).shape = np.array([shape[1], shape[0], 1, 1], dtype=np.int64)
