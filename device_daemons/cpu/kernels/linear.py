"""ScaleShift (y = weights[c] * x + biases[c], channel axis 1; a 1-D tensor's axis 0; a
scalar is one channel) and Eltwise
(sum with optional coefficients, mul, max over any number of same-shaped inputs)."""
from __future__ import annotations

import numpy as np

from ir.comparisons import BINARY, COMPARE

from .base import Kernel, broadcast_shape, channel_vector, register


def _channels(shape) -> int:
    return shape[1] if len(shape) > 1 else shape[0] if len(shape) else 1


@register("ScaleShift")
class ScaleShift(Kernel):
    supports_inplace = True

    def __init__(self, layer):
        super().__init__(layer)
        self.weights = self.blob("weights", required=False)
        self.biases = self.blob("biases", required=False)
        if self.weights is None and self.biases is None:
            raise self.error("has neither 'weights' nor 'biases' blobs")
        self._key = None

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 1)
        shape = input_shapes[0]
        channels = _channels(shape)
        for blob, what in ((self.weights, "the 'weights' blob"), (self.biases, "the 'biases' blob")):
            if blob is not None:
                channel_vector(self, blob, channels, what)
        return [tuple(shape)]

    def _vectors(self, ndim, channels):
        key = (ndim, channels)
        if self._key != key:
            def prep(v):
                if v is None:
                    return None
                v = channel_vector(self, v, channels, "a blob")
                return broadcast_shape(v, ndim) if ndim > 1 else v if ndim else v.reshape(())
            self._w, self._b = prep(self.weights), prep(self.biases)
            self._key = key
        return self._w, self._b

    def forward(self, inputs):
        x = inputs[0]
        channels = _channels(x.shape)
        w, b = self._vectors(x.ndim, channels)
        out = x if self.inplace else None
        if w is not None:
            out = np.multiply(x, w, out=out)
            if b is not None:
                out += b
        else:
            out = np.add(x, b, out=out)
        return [out]


@register("Eltwise")
class Eltwise(Kernel):
    supports_inplace = True

    def __init__(self, layer):
        super().__init__(layer)
        self.op = self.attrs["operation"]
        self.coeff = self.attrs["coeff"]
        if self.coeff is not None and self.op != "sum":
            raise self.error("coefficients are only allowed for operation sum")
        self.compare = COMPARE.get(self.op)
        self.binary = BINARY.get(self.op)  # (a comparison, floor_div or floor_mod: two inputs exactly)

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        if len(input_shapes) < 1:
            raise self.error("takes at least one input")
        first = tuple(input_shapes[0])
        for s in input_shapes[1:]:
            if tuple(s) != first:
                raise self.error(f"inputs have different shapes: {', '.join(str(list(x)) for x in input_shapes)}")
        if self.coeff is not None and len(self.coeff) != len(input_shapes):
            raise self.error(f"has {len(self.coeff)} coefficients for {len(input_shapes)} inputs")
        if self.binary is not None and len(input_shapes) != 2:
            what = "compares" if self.compare is not None else f"{self.op} takes"
            raise self.error(f"{what} two inputs, not {len(input_shapes)}")
        return [first]

    def forward(self, inputs):
        x0 = inputs[0]
        coeff = self.coeff
        out = x0 if self.inplace else None
        if self.binary is not None:  # (a comparison: 1.0 where it holds)
            held = self.binary(x0, inputs[1])
            if out is None:
                return [held.astype(np.float32)]
            np.copyto(out, held)
            return [out]
        if self.op == "sum":
            if coeff is not None and coeff[0] != 1.0:
                out = np.multiply(x0, np.float32(coeff[0]), out=out)
            elif out is None:
                out = x0.copy()
            for i, x in enumerate(inputs[1:], start=1):
                if coeff is not None and coeff[i] != 1.0:
                    out += np.float32(coeff[i]) * x
                else:
                    out += x
        else:
            op = np.multiply if self.op == "mul" else np.maximum
            if len(inputs) == 1:
                return [x0 if out is not None else x0.copy()]
            out = op(x0, inputs[1], out=out)
            for x in inputs[2:]:
                op(out, x, out=out)
        return [out]


@register("Select")
class Select(Kernel):
    """input 1 where input 0 is not 0, else input 2 (same shapes: the converter broadcasts)."""

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, 3)
        if len({tuple(s) for s in input_shapes}) != 1:
            raise self.error(f"inputs have different shapes: {', '.join(str(list(s)) for s in input_shapes)}")
        return [tuple(input_shapes[0])]

    def forward(self, inputs):
        cond, a, b = inputs
        return [np.where(cond != 0, a, b)]
