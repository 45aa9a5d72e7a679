"""Typed access to one IR v2 layer's <data> attributes and blobs, for the mappers.

The one place the v11 emitter reads v2 attributes: names, spellings and defaults
are those the CPU daemon's kernels read (device_daemons/cpu/kernels), so an IR
means the same on our daemon and on OpenVINO. When the shared layer schema lands
in ir/, this module reads through it instead.
"""
from __future__ import annotations

import numpy as np

from ..attrs import as_bool, as_float, as_int, floats, ints
from ..errors import IRError
from ..model import Layer

REQUIRED = object()


class LayerAttrs:
    def __init__(self, layer: Layer):
        self.layer = layer

    def error(self, message: str) -> IRError:
        layer = self.layer
        return IRError(f"layer {layer.name!r} (type {layer.type}, id={layer.id}): {message}")

    # --- attributes -------------------------------------------------------------
    def _get(self, parser, names, default):
        names = (names,) if isinstance(names, str) else tuple(names)
        for name in names:
            if name in self.layer.data:
                try:
                    return parser(self.layer.data[name], name)
                except IRError as err:
                    raise self.error(err.message) from None
        if default is REQUIRED:
            raise self.error(f"missing attribute {names[0]!r}; the IR is incomplete, convert the model again")
        return default

    def int(self, names, default=REQUIRED) -> int:
        return self._get(as_int, names, default)

    def float(self, names, default=REQUIRED) -> float:
        return self._get(as_float, names, default)

    def bool(self, names, default=REQUIRED) -> bool:
        return self._get(as_bool, names, default)

    def ints(self, names, default=REQUIRED) -> list[int]:
        return self._get(ints, names, default)

    def floats(self, names, default=REQUIRED) -> list[float]:
        return self._get(floats, names, default)

    def str(self, names, default=REQUIRED) -> str:
        return self._get(lambda text, name: text.strip(), names, default)

    def choice(self, names, choices: dict[str, str], default=REQUIRED) -> str:
        """The canonical value of an enum attribute; `choices` maps every accepted
        spelling to it."""
        value = self.str(names, default)
        if value not in choices:
            name = names if isinstance(names, str) else names[0]
            raise self.error(f"attribute {name!r} is {value!r}; expected one of {', '.join(sorted(choices))}")
        return choices[value]

    def spatial(self, base: str, default=REQUIRED, plural: str | None = None) -> tuple[int, int]:
        """A 2-D parameter as (y, x): from `base-x`/`base-y`, else the list `base` or
        `plural` ("h,w", or the 4-D "1,1,h,w" of `stride`)."""
        data = self.layer.data
        x, y = f"{base}-x", f"{base}-y"
        if x in data or y in data:
            if x not in data or y not in data:
                raise self.error(f"has only one of the attributes {x!r} and {y!r}; both are needed")
            return self.int(y), self.int(x)
        for name in (base, plural):
            if name and name in data:
                values = self.ints(name)
                if not values:
                    raise self.error(f"attribute {name!r} is empty")
                return (values[0], values[0]) if len(values) == 1 else (values[-2], values[-1])
        if default is REQUIRED:
            raise self.error(f"missing attributes {x!r} and {y!r}; the IR is incomplete, convert the model again")
        return default

    def window(self):
        """(kernel, stride, pads begin, pads end) of a sliding-window layer, each (y, x)."""
        kernel = self.spatial("kernel", plural="kernel_size")
        stride = self.spatial("stride", (1, 1), plural="strides")
        pad = self.spatial("pad", (0, 0), plural="pads_begin")
        data = self.layer.data
        if "pad-b" in data or "pad-r" in data:
            pad_end = (self.int("pad-b", pad[0]), self.int("pad-r", pad[1]))
        elif "pads_end" in data:
            values = self.ints("pads_end")
            pad_end = (values[-2], values[-1]) if len(values) >= 2 else (values[0], values[0])
        else:
            pad_end = pad
        if min(kernel) <= 0 or min(stride) <= 0:
            raise self.error(f"kernel {list(kernel)} and stride {list(stride)} must be positive")
        if min(pad) < 0 or min(pad_end) < 0:
            raise self.error(f"padding {list(pad)}, {list(pad_end)} must not be negative")
        return kernel, stride, pad, pad_end

    # --- blobs and ports --------------------------------------------------------
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
