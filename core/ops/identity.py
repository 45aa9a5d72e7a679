"""Identity (Caffe Dropout, Split copies): removed by core/middle/identity.py."""
import numpy as np

from core.ops.op import Op


class Identity(Op):
    op = "Identity"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Identity", "op": self.op, "infer": self.infer}, attrs)

    @staticmethod
    def infer(node):
        shape = node.in_node(0).shape
        for out in node.out_nodes().values():
            out.shape = np.array(shape, dtype=np.int64)


class Silence(Op):
    """Caffe Silence consumes blobs and produces nothing: dropped before emission."""
    op = "Silence"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Silence", "op": self.op, "infer": lambda node: None}, attrs)
