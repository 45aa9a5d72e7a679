"""In-memory form of an IR v11 model: opset operations joined by tensors.

An `Op` is one <layer> of the .xml (type, opset version, <data> attributes); its
inputs are `Tensor`s produced by earlier ops, its outputs are the tensors it makes
(element type, static shape, tensor names). `Model` is the builder: ops are added
in data-flow order (an op can only consume tensors that exist), so the list of ops
is already topologically sorted when it is written.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..attrs import fmt_value
from ..errors import IRError

# element type -> (port precision as written in the .xml, numpy dtype of a Const)
ELEMENT_TYPES: dict[str, tuple[str, np.dtype]] = {
    "f32": ("FP32", np.dtype(np.float32)),
    "f16": ("FP16", np.dtype(np.float16)),
    "i64": ("I64", np.dtype(np.int64)),
    "i32": ("I32", np.dtype(np.int32)),
    "u8": ("U8", np.dtype(np.uint8)),
    "boolean": ("BOOL", np.dtype(np.bool_)),
}
_DTYPE_TO_ELEMENT = {np.dtype(np.float64): "f32", **{dt: et for et, (_, dt) in ELEMENT_TYPES.items()}}


@dataclass(eq=False)
class Tensor:
    producer: "Op"
    index: int                 # output index of the producer (0-based)
    element_type: str
    shape: tuple[int, ...]
    names: list[str] = field(default_factory=list)


@dataclass(eq=False)
class Op:
    type: str
    version: str               # "opset1" ... or an extension's version
    name: str
    attrs: dict[str, str]
    inputs: list[Tensor]
    outputs: list[Tensor] = field(default_factory=list)
    rt_info: list[str] = field(default_factory=list)   # <rt_info> attribute names (version 0)
    value: np.ndarray | None = None                     # a Const's data

    @property
    def out(self) -> Tensor:
        """The only output."""
        if len(self.outputs) != 1:
            raise IRError(f"internal: {self.type} {self.name!r} has {len(self.outputs)} outputs, not one")
        return self.outputs[0]


def attr_text(value) -> str:
    """An opset attribute as OpenVINO reads it: bools as true/false, lists comma-joined."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) and isinstance(
            np.asarray(value).ravel()[0], (bool, np.bool_)):
        return ",".join("true" if v else "false" for v in np.asarray(value).ravel())
    return fmt_value(value)


def _shape(dims) -> tuple[int, ...]:
    return tuple(int(d) for d in dims)


class Model:
    """The ops of one model, in data-flow order, and the model's <rt_info>."""

    def __init__(self, name: str):
        self.name = name
        self.ops: list[Op] = []
        self.rt_info: dict[str, object] = {}   # str value, or a dict of str for a section

    # --- adding ops -------------------------------------------------------------
    def add(self, type_: str, inputs, out_shapes, *, name: str, version: str = "opset1", attrs=None,
            element_types=None) -> Op:
        """Appends an op with outputs of the given shapes (f32 unless told otherwise)."""
        inputs = list(inputs)
        for t in inputs:
            if not isinstance(t, Tensor):
                raise IRError(f"internal: input of {type_} {name!r} is {t!r}, not a tensor")
        op = Op(type_, version, name, {k: attr_text(v) for k, v in (attrs or {}).items() if v is not None}, inputs)
        types = element_types or ["f32"] * len(out_shapes)
        for i, (shape, et) in enumerate(zip(out_shapes, types)):
            if et not in ELEMENT_TYPES:
                raise IRError(f"internal: unknown element type {et!r}")
            op.outputs.append(Tensor(op, i, et, _shape(shape)))
        self.ops.append(op)
        return op

    def op(self, type_: str, inputs, shape, *, name: str, version: str = "opset1", attrs=None,
           element_type: str = "f32") -> Tensor:
        """Appends a single-output op and returns its output."""
        return self.add(type_, inputs, [shape], name=name, version=version, attrs=attrs,
                        element_types=[element_type]).out

    def const(self, value, *, name: str, element_type: str | None = None) -> Tensor:
        """A Const holding `value` (float64 is stored as f32; give element_type to convert)."""
        array = np.asarray(value)
        if element_type is None:
            element_type = _DTYPE_TO_ELEMENT.get(array.dtype)
            if element_type is None:
                raise IRError(f"internal: no IR element type for a constant of dtype {array.dtype} ({name!r})")
        array = np.asarray(array, dtype=ELEMENT_TYPES[element_type][1], order="C")  # keeps 0-D scalars
        op = self.add("Const", [], [array.shape], name=name, element_types=[element_type])
        op.value = array
        return op.out

    def ints(self, values, *, name: str) -> Tensor:
        """A 1-D i64 Const (shapes, axes, orders)."""
        return self.const(np.asarray(list(values), np.int64).reshape(-1), name=name, element_type="i64")

    def parameter(self, name: str, shape, element_type: str = "f32") -> Tensor:
        return self.op("Parameter", [], shape, name=name, element_type=element_type,
                       attrs={"shape": list(_shape(shape)), "element_type": element_type})

    def result(self, tensor: Tensor, name: str) -> Op:
        return self.add("Result", [tensor], [], name=name)

    # --- queries ----------------------------------------------------------------
    def parameters(self) -> list[Op]:
        return [op for op in self.ops if op.type == "Parameter"]
