"""Input: a network entry point (IR type Input)."""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op


class Parameter(Op):
    op = "Parameter"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Input", "op": self.op, "infer": self.infer}, attrs)

    @staticmethod
    def infer(node):
        shape = node.soft_get("shape")
        if shape is None:
            raise ShapeError("Input '{}' has no shape in the model. Please provide it with --input_shape.",
                             node.name, faq=56)
        if np.any(np.asarray(shape) <= 0):
            raise ShapeError("Input '{}' has an undefined or non-positive dimension {}. Specify it with "
                             "--input_shape (or the batch with -b).", node.name, list(shape), faq=38)
        node.out_node(0).shape = np.array(shape, dtype=np.int64)
