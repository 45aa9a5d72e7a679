"""ScaleShift (weights/biases blobs only) and Eltwise."""
from .attribute import Enum, Floats
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("ScaleShift", []),
    LayerSchema("Eltwise", [
        Enum("operation", ("sum", "mul", "max"), "sum", spellings={"add": "sum", "prod": "mul"}, ignore_case=True),
        Floats("coeff", None, doc="sum only: one coefficient per input"),
    ]),
]
