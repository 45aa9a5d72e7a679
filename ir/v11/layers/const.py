"""Const (own type: the blob `custom` with the output port's shape) -> Const."""
from __future__ import annotations

import math

from .base import Mapping, maps


@maps("Const")
def const(m: Mapping):
    shape = m.out_dims()
    value = m.attrs.blob("custom", size=math.prod(shape))
    return [m.model.const(value.reshape(shape), name=m.name())]
