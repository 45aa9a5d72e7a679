"""ScaleShift (weights/biases blobs only) and Eltwise."""
from .attribute import Enum, Floats
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("ScaleShift", []),
    LayerSchema("Eltwise", [
        Enum("operation", ("sum", "mul", "max"), "sum", spellings={"add": "sum", "prod": "mul"}, ignore_case=True),
        Floats("coeff", None, doc="sum only: one coefficient per input"),
    ]),
    LayerSchema("Select", [], doc="input 1 where input 0 is not 0, else input 2 (three tensors of one shape): "
                                  "tf.where's, a causal attention mask's"),
]
