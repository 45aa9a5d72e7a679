"""What the Inference Engine's Python API says of a network's tensors, for code ported
from it: `net.input_info[name].input_data.shape`, `.precision = "U8"`, `.layout = "NHWC"`,
`net.outputs[name].shape`.

A DataPtr is the dims as a list (what this API returns everywhere), with IE's attributes
on it. An input's precision says what the caller passes (any of these is converted to the
daemon's float32 anyway); its layout NHWC makes the client transpose a 4-D input to the
IR's NCHW before sending it, as IE's plugins did.
"""
from __future__ import annotations

import numpy as np

from core.errors import Error

PRECISIONS = ("FP32", "FP16", "U8", "I8", "U16", "I16", "I32", "I64", "BOOL")


class StatusCode:
    """wait()'s results and a completion callback's status, as the Inference Engine's."""
    OK = 0
    GENERAL_ERROR = -1
    RESULT_NOT_READY = -9
    INFER_NOT_STARTED = -11
_LAYOUTS = {1: "C", 2: "NC", 3: "CHW", 4: "NCHW", 5: "NCDHW"}


def default_layout(rank: int) -> str:
    return _LAYOUTS.get(rank, "ANY")


class DataPtr(list):
    """Dims (a list) with IE's DataPtr attributes: name, shape, precision, layout."""

    def __init__(self, name: str, dims, precision: str = "FP32", layout: str | None = None):
        super().__init__(int(d) for d in dims)
        self.name = name
        self.precision = precision
        self.layout = layout or default_layout(len(self))

    @property
    def shape(self) -> list:
        return list(self)


class InputInfo:
    """IE's InputInfoPtr of one input of an IENetwork: precision and layout may be set
    before load_network (read_only: an ExecutableNetwork's, as IE's InputInfoCPtr)."""

    def __init__(self, owner, name: str, read_only: bool = False):
        self._owner, self.name, self._read_only = owner, name, read_only

    @property
    def input_data(self) -> DataPtr:
        return DataPtr(self.name, self._owner.inputs[self.name], self.precision, self.layout)

    @property
    def tensor_desc(self) -> DataPtr:
        return self.input_data

    @property
    def precision(self) -> str:
        return self._owner._input_precision.get(self.name, "FP32")

    @precision.setter
    def precision(self, value: str) -> None:
        self._writable("precision")
        value = str(value).upper()
        if value not in PRECISIONS:
            raise Error("input {!r}: precision {!r} is not one of {}", self.name, value, ", ".join(PRECISIONS))
        self._owner._input_precision[self.name] = value

    @property
    def layout(self) -> str:
        return self._owner._input_layout.get(self.name, default_layout(len(self._owner.inputs[self.name])))

    @layout.setter
    def layout(self, value: str) -> None:
        self._writable("layout")
        value = str(value).upper()
        rank = len(self._owner.inputs[self.name])
        allowed = ("NCHW", "NHWC") if rank == 4 else (default_layout(rank),)
        if value not in allowed:
            raise Error("input {!r} ({}-D): layout {!r} is not one of {} (the IR's layout is {})", self.name, rank,
                        value, ", ".join(allowed), default_layout(rank))
        self._owner._input_layout[self.name] = value

    def _writable(self, what: str) -> None:
        if self._read_only:
            raise Error("input {!r}: the {} of a loaded network cannot change; set it on the IENetwork's "
                        "input_info before load_network", self.name, what)


class Blob:
    """IE's Blob: `buffer` (the array) and `tensor_desc` (dims, precision, layout)."""

    def __init__(self, name: str, buffer: np.ndarray, layout: str | None = None):
        self.buffer = buffer
        self.tensor_desc = DataPtr(name, buffer.shape, "FP32", layout)


def input_blobs(owner, blobs: dict) -> dict:
    """A request's input blobs, made once per input of `owner` (an ExecutableNetwork's inputs
    and input_info layouts): float32 buffers the caller fills, in the layout it gives."""
    for name, dims in owner.inputs.items():
        layout = owner._input_layout.get(name)
        shape = (dims[0], dims[2], dims[3], dims[1]) if layout == "NHWC" else tuple(dims)
        if name not in blobs or blobs[name].buffer.shape != shape:
            blobs[name] = Blob(name, np.zeros(shape, np.float32), layout)
    return blobs


class RequestIdioms:
    """The Inference Engine's request idioms, shared by InferRequest and HETERO's request:
    a completion callback, input and output blobs, REQUEST_BUSY. A subclass sets
    `_exec_net` and `outputs`, calls _init_idioms() and says when it is `busy`."""

    def _init_idioms(self) -> None:
        self._callback = None
        self._input_blobs: dict = {}  # input_blobs, made on first use

    @property
    def busy(self) -> bool:
        raise NotImplementedError

    def set_completion_callback(self, py_callback, py_data=None) -> None:
        """IE's: py_callback(status, py_data) when an asynchronous run of this request ends
        (`outputs` are set by then), StatusCode.OK or GENERAL_ERROR (wait() raises the error)."""
        self._callback = None if py_callback is None else (py_callback, py_data)

    @property
    def input_blobs(self) -> dict:
        """IE's input blobs: fill `input_blobs[name].buffer[:]`, then infer() / async_infer()
        without inputs sends them."""
        return input_blobs(self._exec_net, self._input_blobs)

    @property
    def output_blobs(self) -> dict:
        """IE's output blobs of the last completed run: `output_blobs[name].buffer`."""
        return {name: Blob(name, array) for name, array in self.outputs.items()}

    def _inputs_or_blobs(self, inputs):
        if inputs is None and self._input_blobs:
            return {name: blob.buffer for name, blob in self._input_blobs.items()}
        return inputs

    def _check_idle(self) -> None:
        if self.busy:
            index = getattr(self, "index", -1)
            raise Error("REQUEST_BUSY: the request{} is still running; wait() for it before starting it again",
                        f" {index}" if index >= 0 else "")


def take_input_settings(owner, network) -> None:
    """A loaded network's copy of the IENetwork's input_info at load: precisions, layouts and
    the NHWC inputs the client transposes before sending (`_nhwc`)."""
    owner._input_precision = dict(network._input_precision)
    owner._input_layout = dict(network._input_layout)
    owner._nhwc = frozenset(name for name, layout in network._input_layout.items() if layout == "NHWC")


def to_ir_layout(inputs: dict, nhwc: frozenset) -> dict:
    """`inputs` ({name: array}) with the NHWC ones transposed to the IR's NCHW (the caller's
    arrays are not changed)."""
    out = dict(inputs)
    for name in nhwc & out.keys():
        arr = np.asarray(out[name])
        if arr.ndim != 4:
            raise Error("input {!r} has layout NHWC (input_info), but the array given has {} dims", name, arr.ndim)
        out[name] = np.ascontiguousarray(arr.transpose(0, 3, 1, 2))
    return out
