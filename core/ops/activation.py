"""Element-wise activations: ReLU, Activation (sigmoid/tanh/elu/relu6/erf/gelu/exp/log/floor/ceil/round/trunc/
softplus/sign, the trigonometric and hyperbolic functions and their inverses, log1p/expm1/softsign), Clamp, PReLU,
Power, FakeQuantize."""
from core.ops.op import Op, copy_shape_infer, ir_attrs


class ReLU(Op):
    op = "ReLU"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "ReLU", "op": self.op, "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("ReLU", negative_slope=lambda n: n.soft_get("negative_slope") or None)


def _gelu_mode(node):
    return node.soft_get("approximation_mode") if node.activation == "gelu" else None


class Activation(Op):
    op = "Activation"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Activation", "op": self.op, "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Activation", type=lambda n: n.activation, approximation_mode=_gelu_mode)


class Clamp(Op):
    op = "Clamp"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Clamp", "op": self.op, "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Clamp")


class PReLU(Op):
    op = "PReLU"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "PReLU", "op": self.op, "channel_shared": False,
                                 "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("PReLU")


class Power(Op):
    """y = (shift + scale * x) ^ power."""
    op = "Power"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Power", "op": self.op, "power": 1.0, "scale": 1.0, "shift": 0.0,
                                 "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("Power")


class FakeQuantize(Op):
    """Quantized to `levels` values of [input_low, input_high], mapped onto [output_low, output_high]."""
    op = "FakeQuantize"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "FakeQuantize", "op": self.op, "infer": copy_shape_infer}, attrs)

    def backend_attrs(self):
        return ir_attrs("FakeQuantize")
