"""One IR v2 layer as the mappers see it: its attributes typed by the shared layer
schema (ir/schema: names, kinds, defaults, the same the CPU daemon's kernels
read), its blobs and its port dims, with errors that name the layer."""
from __future__ import annotations

import numpy as np

from ..errors import IRError
from ..model import Layer
from ..schema import read_attrs
from ..schema.layer import describe_layer


class LayerAttrs:
    def __init__(self, layer: Layer):
        self.layer = layer
        self._values = None

    @property
    def values(self) -> dict:
        """{attribute: typed value}, defaults filled in (SchemaError if they do not fit)."""
        if self._values is None:
            self._values = read_attrs(self.layer)
        return self._values

    def __getitem__(self, name: str):
        return self.values[name]

    def error(self, message: str) -> IRError:
        return IRError(f"{describe_layer(self.layer)}: {message}")

    def blob(self, names, required: bool = True, size: int | None = None) -> np.ndarray | None:
        """A float blob, flat, in the dtype it has (float32 or float16)."""
        names = (names,) if isinstance(names, str) else tuple(names)
        for name in names:
            if name in self.layer.blobs:
                value = np.asarray(self.layer.blobs[name])
                if value.dtype.kind != "f":
                    raise self.error(f"blob {name!r} has dtype {value.dtype}; expected float32 or float16")
                if value.dtype not in (np.float16, np.float32):
                    value = value.astype(np.float32)
                value = value.reshape(-1)
                if size is not None and value.size != size:
                    raise self.error(f"blob {name!r} has {value.size} values, expected {size}")
                return value
        if required:
            raise self.error(f"missing blob {names[0]!r}; the IR is incomplete, convert the model again")
        return None

    def in_dims(self, index: int = 0) -> tuple[int, ...]:
        ports = self.layer.inputs
        if index >= len(ports):
            raise self.error(f"has {len(ports)} input port(s), input {index} is needed")
        return tuple(ports[index].dims)

    def out_dims(self, index: int = 0) -> tuple[int, ...]:
        ports = self.layer.outputs
        if index >= len(ports):
            raise self.error(f"has {len(ports)} output port(s), output {index} is needed")
        return tuple(ports[index].dims)
