"""ScaleShift (weights/biases blobs only) and Eltwise."""
from ..comparisons import ARITHMETIC, COMPARE
from .attribute import Enum, Floats
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("ScaleShift", []),
    LayerSchema("Eltwise", [
        Enum("operation", ("sum", "mul", "max") + tuple(COMPARE) + tuple(ARITHMETIC), "sum",
             spellings={"add": "sum", "prod": "mul"}, ignore_case=True,
             doc="a comparison (as the reference's Eltwise from IR v5 on) takes two inputs and gives 1.0 where it "
                 "holds, else 0.0; floor_div and floor_mod take two (TensorFlow's FloorDiv and FloorMod)"),
        Floats("coeff", None, doc="sum only: one coefficient per input"),
    ]),
    LayerSchema("Select", [], doc="input 1 where input 0 is not 0, else input 2 (three tensors of one shape): "
                                  "tf.where's, a causal attention mask's"),
]
