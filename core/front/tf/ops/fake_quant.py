"""TensorFlow's fake quantization (quantization-aware training): FakeQuantWithMinMaxArgs (the range in
attributes), FakeQuantWithMinMaxVars (in constant inputs) and FakeQuantWithMinMaxVarsPerChannel (a range per
last-axis channel). The range is nudged as TensorFlow's kernel nudges it (so that 0 is exactly one of the
2^num_bits values, or 2^num_bits - 1 with narrow_range); on constants - a quantized model's weights - the op
folds at conversion; on the model's data (one range for the tensor) it is our FakeQuantize layer over the nudged
range. A range per channel on the model's data offloads (--offload_unsupported_operations_to_tf)."""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.ops.base import SameShapeOp, const_input, expect_inputs
from core.front.tf.tensors import attr, describe
from core.ops.activation import FakeQuantize as IRFakeQuantize

F32 = np.float32


def nudge(node, low: float, high: float, bits: int, narrow: bool) -> tuple[F32, F32, F32, int]:
    """(nudged min, nudged max, scale, levels) in float32, as TensorFlow's Nudge computes them."""
    if not 2 <= bits <= 16:
        raise ShapeError("{}: num_bits {} is not within 2 .. 16.", describe(node), bits)
    low, high = F32(low), F32(high)
    if not low < high:
        raise ShapeError("{}: the range [{}, {}] is empty (min must be below max).", describe(node), low, high)
    q_min, q_max = F32(1.0 if narrow else 0.0), F32((1 << bits) - 1)
    scale = F32((high - low) / (q_max - q_min))
    from_min = F32(q_min - low / scale)
    if from_min < q_min:
        zero = q_min
    elif from_min > q_max:
        zero = q_max
    else:  # std::round: halves away from zero
        zero = F32(np.floor(from_min + F32(0.5)))
    return F32((q_min - zero) * scale), F32((q_max - zero) * scale), scale, int(q_max - q_min) + 1


def fake_quant(x, low, high, scale, divide: bool):
    """x quantized over [low, high] in steps of `scale` (TensorFlow's kernels: Args multiplies by 1 / scale, Vars
    and VarsPerChannel divide by it)."""
    shifted = np.clip(x.astype(F32), low, high) - low
    steps = shifted / scale if divide else shifted * F32(F32(1.0) / scale)
    return (np.floor(steps + F32(0.5)) * scale + low).astype(F32)


class FakeQuant(SameShapeOp):
    tf_types = ("FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxVarsPerChannel")

    @staticmethod
    def extract(node):
        expect_inputs(node, 1 if node.tf_op == "FakeQuantWithMinMaxArgs" else 3)
        node.tf["bits"] = attr(node, "num_bits", "i", 8)
        node.tf["narrow"] = attr(node, "narrow_range", "b", False)
        if node.tf_op == "FakeQuantWithMinMaxArgs":
            node.tf["range"] = (attr(node, "min", "f", -6.0), attr(node, "max", "f", 6.0))

    @staticmethod
    def _ranges(node, channels: int | None):
        """[(nudged min, nudged max, scale, levels)]: one, or one per channel."""
        if node.tf_op == "FakeQuantWithMinMaxArgs":
            lows, highs = np.array([node.tf["range"][0]]), np.array([node.tf["range"][1]])
        else:
            lows, highs = (const_input(node, p, w).astype(F32).ravel() for p, w in ((1, "min"), (2, "max")))
        per_channel = node.tf_op == "FakeQuantWithMinMaxVarsPerChannel"
        want = channels if per_channel else 1
        if len(lows) != want or len(highs) != want:
            raise ShapeError("{}: {} min and {} max values; {} expected.", describe(node), len(lows), len(highs), want)
        return [nudge(node, lo, hi, node.tf["bits"], node.tf["narrow"]) for lo, hi in zip(lows, highs)]

    @staticmethod
    def evaluate(node, values):
        x = values[0]
        ranges = FakeQuant._ranges(node, x.shape[-1] if x.ndim else 1)
        divide = node.tf_op != "FakeQuantWithMinMaxArgs"
        if len(ranges) == 1:
            low, high, scale, _ = ranges[0]
            return [fake_quant(x, low, high, scale, divide)]
        out = np.empty(x.shape, F32)
        for c, (low, high, scale, _) in enumerate(ranges):
            out[..., c] = fake_quant(x[..., c], low, high, scale, divide)
        return [out]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        if node.tf_op == "FakeQuantWithMinMaxVarsPerChannel":
            raise lw.unsupported(node, "a range per channel on the model's data (one range for the tensor, or a "
                                       "range per channel of a constant, is converted)")
        ((low, high, _, levels),) = FakeQuant._ranges(node, None)
        lw.keep_inputs(node, x)
        lw.retype(node, IRFakeQuantize, {"levels": levels, "input_low": float(low), "input_high": float(high),
                                         "output_low": float(low), "output_high": float(high)})
