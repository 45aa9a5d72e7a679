"""Element-wise activations: ReLU, Activation, Clamp, PReLU, Power, FakeQuantize."""
from .attribute import Bool, Enum, Float, Int
from .layer import LayerSchema

SCHEMAS = [
    LayerSchema("ReLU", [Float("negative_slope", 0.0)]),
    LayerSchema("Activation", [
        Enum("type", ("sigmoid", "tanh", "elu", "relu6", "abs", "relu", "erf", "gelu", "exp", "log", "floor", "ceil",
                      "round", "trunc", "softplus", "sign", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                      "asinh", "acosh", "atanh", "log1p", "expm1", "softsign"), ignore_case=True,
             doc="round: to the nearest integer, halves to even (TensorFlow's Round); trunc: toward zero (a cast "
                 "to an integer type); softplus: log(1 + exp(x)); sign: -1, 0 or 1 (NaN stays NaN); sin ... atanh: "
                 "the trigonometric and hyperbolic functions and their inverses (NaN outside their domain); log1p: "
                 "log(1 + x), expm1: exp(x) - 1, both exact near 0; softsign: x / (1 + |x|)"),
        Float("alpha", 1.0, doc="elu: the scale of the negative part"),
        Float("negative_slope", 0.0, doc="relu: the leak"),
        Enum("approximation_mode", ("erf", "tanh"), "erf", ignore_case=True,
             doc="gelu: x * Phi(x) exactly (erf) or in the tanh form (ir/special.py)"),
    ]),
    LayerSchema("Clamp", [Float("min"), Float("max")]),
    LayerSchema("PReLU", [Bool("channel_shared", False)]),
    LayerSchema("Power", [Float("power", 1.0), Float("scale", 1.0), Float("shift", 0.0)],
                doc="y = (shift + scale * x) ^ power"),
    LayerSchema("FakeQuantize", [Int("levels", min=2), Float("input_low"), Float("input_high"), Float("output_low"),
                                 Float("output_high")],
                doc="x clamped to [input_low, input_high], rounded to one of `levels` evenly spaced values there "
                    "(halves up), mapped onto [output_low, output_high]: OpenVINO's FakeQuantize with scalar ranges, "
                    "TensorFlow's FakeQuant ops (their nudged range)"),
]
