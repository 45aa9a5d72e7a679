"""Extension op for Caffe's BNLL (log(1 + exp(x))): same shape as its input."""
from core.ops.op import Op


class BNLLOp(Op):
    op = "BNLL"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "BNLL", "op": "BNLL", "beta": 1,
                                 "infer": BNLLOp.infer}, attrs)

    def supported_attrs(self):
        return ["beta"]

    @staticmethod
    def infer(node):
        node.out_node(0).shape = node.in_node(0).shape.copy()
