"""TFCustomSubgraphCall: a TensorFlow sub-graph TensorFlow runs at inference (the
converter's offload options; the CPU daemon calls a TF worker for it).

    protobuf              the sub-graph: a serialized GraphDef, base64 (the
                          reference keeps it in the .xml too; it is self-contained)
    input_nodes_names     its Placeholders, one per input port, in port order
                          (they take the IR's tensors, NCHW for 4-D ones: the
                          Transposes to TensorFlow's layout are inside the graph)
    output_tensors_names  the tensors it gives, one per output port, in order
                          (float32, 4-D ones NCHW: again inside the graph)
    real_input_dims       the input dims at conversion, ';' between inputs
"""
from .attribute import Str
from .layer import LayerSchema

SCHEMAS = [LayerSchema("TFCustomSubgraphCall", [
    Str("input_nodes_names", ""), Str("output_tensors_names"), Str("real_input_dims", ""), Str("protobuf"),
])]
