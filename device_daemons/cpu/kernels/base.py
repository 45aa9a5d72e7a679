"""The CPU kernel interface and the registry of built-in kernels.

A kernel computes one IR layer. The interface is deliberately the one a user's
custom CPU layer has (OpenCV DNN style), so built-in and custom kernels are run
the same way by the execution plan (device_daemons/cpu/plan.py):

    class MyKernel:
        type = "MyLayer"                      # IR layer type(s) it computes
        def __init__(self, layer): ...        # once per layer: parse attributes, prepare blobs
        def getMemoryShapes(self, input_shapes):   # list of tuples -> list of output shapes
            ...
        def forward(self, inputs):            # list of float32 arrays -> list of arrays
            ...
        def finalize(self, layer): ...        # optional: called after every (re)shape with
                                              # the layer whose port dims are the current shapes

`Kernel` below is a convenience base class for built-in kernels: it keeps the
layer, reads its attributes through the IR schema (`self.attrs`: typed values with
the defaults filled in, e.g. `self.attrs["kernel"] == (3, 3)`; errors name the
layer) and converts blobs (float32 or float16 in the IR) to float32 once.

In-place execution: the plan sets `kernel.inplace = True` when the buffer of the
kernel's first input has no other reader (not a network input or output, no other
consumer, no other view of it alive). A kernel that supports it (class attribute
`supports_inplace = True`) may then write its result into inputs[0] and return it.
Kernels whose outputs are views of their inputs (Reshape, Split, ...) declare
`output_is_view = True` so the plan never lets a consumer write through a view
into a buffer that someone else still reads. A kernel whose outputs are views of a
buffer of its own that its next run writes again (`reuses_output = True`, e.g. the
shared buffer of an offloaded TensorFlow layer) saves a copy per run: its
consumers read the buffer where it is, and only a network output is copied out of
it, by the program (Program.run), before the run ends.
"""
from __future__ import annotations

import numpy as np

from ir.schema import SchemaError, layer_schema

from ...plan_io import KernelError, describe  # noqa: F401  (the kernels' error: every device's plan raises it)

# IR type -> kernel class. Filled by the @register decorator of each kernel module.
KERNELS: dict[str, type] = {}


def registrar(table: dict[str, type]):
    """The `register(*types)` class decorator of a device's kernel table: the class
    computes IR layers of these types."""
    def register(*types: str):
        def wrap(cls):
            for t in types:
                table[t] = cls
            cls.types = tuple(types)
            return cls
        return wrap
    return register


register = registrar(KERNELS)


class Kernel:
    """Base class of the built-in kernels (custom kernels need not derive from it)."""

    types: tuple[str, ...] = ()
    schema = None  # an ir.schema.LayerSchema for a type ir/schema does not know (custom kernels)
    supports_inplace = False
    output_is_view = False
    reuses_output = False

    def __init__(self, layer):
        self.layer = layer
        self.inplace = False
        # attributes typed and defaulted by the one IR schema (ir/schema) the converter writes with
        schema = self.schema or layer_schema(layer.type)
        try:
            self.attrs = schema.read(layer) if schema is not None else {}
        except SchemaError as err:
            raise KernelError(layer, err.detail) from None

    # --- the interface -------------------------------------------------------------
    def getMemoryShapes(self, input_shapes):  # noqa: N802 (OpenCV's name)
        return [tuple(input_shapes[0])]

    def forward(self, inputs):
        raise NotImplementedError

    def finalize(self, layer):
        """Called after every shape computation with port dims set to the current shapes."""

    def accelerate(self) -> str | None:
        """Called by the fast CPU backend for a layer it leaves to this kernel: a kernel
        with a native variant switches to it and returns its backend name (what -pc
        prints); None: it stays numpy. NativeUnavailable: the variant cannot run here."""
        return None

    # --- helpers -------------------------------------------------------------------
    def error(self, message: str) -> KernelError:
        return KernelError(self.layer, message)

    def axis_in(self, axis: int, rank: int) -> int:
        """`axis` (negative: from the end) as an index of a rank-D input; an error naming the layer if it is
        out of range."""
        a = axis + rank if axis < 0 else axis
        if not 0 <= a < rank:
            raise self.error(f"axis {axis} is out of range for a {rank}-D input")
        return a

    def blob(self, name, required: bool = True, size: int | None = None):
        """A blob as a float32 array (float16 IR blobs are converted once)."""
        names = (name,) if isinstance(name, str) else tuple(name)
        for n in names:
            if n in self.layer.blobs:
                value = np.asarray(self.layer.blobs[n])
                if value.dtype.kind != "f":
                    raise self.error(f"blob {n!r} has dtype {value.dtype}; expected float32 or float16")
                value = np.ascontiguousarray(value, dtype=np.float32).ravel()
                if size is not None and value.size != size:
                    raise self.error(f"blob {n!r} has {value.size} values, expected {size}")
                return value
        if required:
            raise self.error(f"missing blob {names[0]!r}; the IR .bin/.xml is incomplete, convert the model again")
        return None

    def expect_inputs(self, input_shapes, count: int | tuple[int, int], rank: int | None = None):
        lo, hi = (count, count) if isinstance(count, int) else count
        if not lo <= len(input_shapes) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise self.error(f"takes {want} input(s), got {len(input_shapes)}")
        if rank is not None and len(input_shapes[0]) != rank:
            raise self.error(f"needs a {rank}-D input, got shape {list(input_shapes[0])}")


def channel_vector(kernel: Kernel, values: np.ndarray, channels: int, what: str) -> np.ndarray:
    """A per-channel blob, a single value broadcast to all channels."""
    if values.size == 1:
        return np.full(channels, values[0], dtype=np.float32)
    if values.size != channels:
        raise kernel.error(f"{what} has {values.size} values but the input has {channels} channels")
    return values


def broadcast_shape(values: np.ndarray, rank: int) -> np.ndarray:
    """(C,) -> (1, C, 1, ...) for an input of `rank` dims (channel axis 1)."""
    if rank <= 1:
        return values
    return values.reshape((1, -1) + (1,) * (rank - 2))
