"""TFCustomSubgraphCall: a TensorFlow sub-graph that TensorFlow computes at
inference (the converter's offload options: core/front/tf/offload.py; the CPU
daemon's kernel: device_daemons/cpu/tf_backed.py). Its attributes (ir/schema/
tf_subgraph.py) make it self-contained: the GraphDef itself, its Placeholders
and output tensors, the input dims. Its output shapes are TensorFlow's (asked at
conversion), kept in IR layout."""
import base64

import numpy as np

from core.errors import ShapeError
from core.ops.op import Op, ir_attrs


class TFCustomSubgraphCall(Op):
    op = "TFCustomSubgraphCall"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": self.op, "op": self.op, "infer": self.infer}, attrs)

    def backend_attrs(self):
        return ir_attrs(
            "TFCustomSubgraphCall",
            input_nodes_names=lambda n: ",".join(n.input_nodes_names),
            output_tensors_names=lambda n: ",".join(n.output_tensors_names),
            real_input_dims=lambda n: ";".join(",".join(str(int(d)) for d in dims) for dims in n.real_input_dims),
            protobuf=lambda n: base64.b64encode(n.graph_def).decode("ascii"))

    @staticmethod
    def infer(node):
        shapes = node.ir_output_shapes
        for port, out in node.out_nodes().items():
            if port >= len(shapes):
                raise ShapeError("TFCustomSubgraphCall '{}' has {} outputs; output {} is read.", node.name,
                                 len(shapes), port)
            out.shape = np.array(shapes[port], dtype=np.int64)
