"""Const: a constant tensor as a layer (own type; the IR v2 catalog has none).

Front ends fold constants into the blobs and attributes of the layers that read
them; a constant that is read as a tensor (an Eltwise operand, a Concat part, a
model output) becomes a Const layer: no input, one output, its value in the blob
`custom` (C order, the output port's dims give its shape).
"""
import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs


class Const(Op):
    op = "Const"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Const", "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Const")

    @staticmethod
    def infer(node):
        blobs = [data for name, data, _ in node.blob_inputs() if name == "custom"]
        if len(blobs) != 1:
            raise ShapeError("Const '{}' needs exactly one 'custom' blob with its value.", node.name)
        node.out_node(0).shape = np.array(np.shape(blobs[0].value), dtype=np.int64)
