"""A user op for TensorFlow's Erf (no IR layer has it): the IR keeps type Erf."""
from core.ops.op import Op, copy_shape_infer


class ErfOp(Op):
    op = "Erf"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Erf", "op": self.op, "infer": copy_shape_infer}, attrs)
