"""Half-precision constants the way OpenVINO stores them: an f16 Const followed by
a Convert to f32 marked `decompression` in its rt_info, so the runtime computes in
f32 (or keeps the weights f16 where it can) and the .bin is half the size."""
from __future__ import annotations

from ..precision import to_float16
from .model import Model, Op, Tensor


def decompress_f16_constants(model: Model, compress: bool) -> list[str]:
    """Puts a Convert to f32 after every f16 Const; with `compress` (--data_type
    FP16) f32 Consts become f16 first. Returns the clipping warnings (FAQ #75/#76)."""
    warnings: list[str] = []
    replaced: dict[int, Tensor] = {}
    ops: list[Op] = []
    for op in model.ops:
        op.inputs = [replaced.get(id(t), t) for t in op.inputs]
        ops.append(op)
        if op.type != "Const" or op.out.element_type not in ("f16", "f32"):
            continue
        if op.out.element_type == "f32":
            if not compress:
                continue
            op.value = to_float16(op.value, op.name, warnings)
            op.out.element_type = "f16"
        convert = Op("Convert", "opset1", op.name, {"destination_type": "f32"}, [op.out], rt_info=["decompression"])
        convert.outputs = [Tensor(convert, 0, "f32", op.out.shape, op.out.names)]
        op.out.names = []
        op.name += "_compressed"
        replaced[id(op.out)] = convert.outputs[0]
        ops.append(convert)
    model.ops = ops
    return warnings
