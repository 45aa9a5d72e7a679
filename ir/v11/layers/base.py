"""What a mapper is: a function turning one IR v2 layer into opset ops.

Each family module registers its mappers with `@maps("Type", ...)`. A mapper gets a
`Mapping` (the model being built, the layer, its typed attributes, its input
tensors in port order) and returns one tensor per output port of the layer, in
port order. The op that computes a layer's result is named after the layer; the
ops and constants it needs on the way are named `<layer>/<what>`.
A variant OpenVINO has no operation for raises `Unmappable` with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model import Layer
from ..layer_attrs import LayerAttrs
from ..model import Model, Tensor

MAPPERS: dict[str, object] = {}


def maps(*types: str):
    """Function decorator: it maps IR v2 layers of these types."""
    def wrap(fn):
        for t in types:
            MAPPERS[t] = fn
        return fn
    return wrap


class Unmappable(Exception):
    """This layer (or this variant of it) has no OpenVINO opset equivalent."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Mapping:
    model: Model
    layer: Layer
    attrs: LayerAttrs
    inputs: list[Tensor]

    def name(self, suffix: str | None = None) -> str:
        return self.layer.name if suffix is None else f"{self.layer.name}/{suffix}"

    def op(self, type_: str, inputs, shape, suffix: str | None = None, *, version: str = "opset1", attrs=None,
           element_type: str = "f32") -> Tensor:
        return self.model.op(type_, inputs, shape, name=self.name(suffix), version=version, attrs=attrs,
                             element_type=element_type)

    def const(self, value, suffix: str) -> Tensor:
        """A float constant (a blob keeps float16 if it is float16)."""
        value = np.asarray(value)
        if value.dtype not in (np.float16, np.float32):
            value = value.astype(np.float32)
        return self.model.const(value, name=self.name(suffix))

    def ints(self, values, suffix: str) -> Tensor:
        return self.model.ints(values, name=self.name(suffix))

    def reshape(self, tensor: Tensor, shape, suffix: str | None = None) -> Tensor:
        """Reshape to `shape` (no-op when it already has it); leading dims equal to
        the input's are written as 0 (copied), so a new batch passes through."""
        shape = tuple(int(d) for d in shape)
        if tensor.shape == shape:
            return tensor
        target = self.ints(copied_leading_dims(tensor.shape, shape), f"{suffix or 'reshape'}/shape")
        return self.op("Reshape", [tensor, target], shape, suffix, attrs={"special_zero": True},
                       element_type=tensor.element_type)

    def identity(self, tensor: Tensor) -> Tensor:
        """An op that passes `tensor` through (a Convert to its own type, which
        OpenVINO removes), for a layer that computes nothing but has a name."""
        return self.op("Convert", [tensor], tensor.shape, attrs={"destination_type": tensor.element_type},
                       element_type=tensor.element_type)

    def out_dims(self, index: int = 0) -> tuple[int, ...]:
        return self.attrs.out_dims(index)

    def in_dims(self, index: int = 0) -> tuple[int, ...]:
        return self.attrs.in_dims(index)


def copied_leading_dims(in_shape, out_shape) -> list[int]:
    """Reshape's target `out_shape` with the leading dims it shares with `in_shape`
    written as 0 (special_zero: copy the input's), e.g. the batch."""
    target = list(out_shape)
    for i, (a, b) in enumerate(zip(in_shape, out_shape)):
        if a != b:
            break
        target[i] = 0
    return target


def channel_shape(rank: int, channels: int) -> tuple[int, ...]:
    """Shape of a per-channel constant that broadcasts over an input of `rank`
    dims along axis 1 (numpy rules): (1, C, 1, ...), or (C,) for a 1-D input."""
    if rank <= 1:
        return (channels,)
    return (1, channels) + (1,) * (rank - 2)


def per_channel(m: Mapping, values: np.ndarray, rank: int, channels: int, what: str) -> np.ndarray:
    """A per-channel blob (a single value is kept scalar-like) shaped to broadcast."""
    if values.size == 1:
        return values.reshape((1,) * max(rank, 1))
    if values.size != channels:
        raise m.attrs.error(f"{what} has {values.size} values but the input has {channels} channels")
    return values.reshape(channel_shape(rank, channels))
