"""Tensors of the protocol: its datatypes, and checked decoding of untrusted tensor
data (JSON lists, binary blobs, gRPC contents) into numpy arrays."""
from __future__ import annotations

import math

import numpy as np

from .errors import bad_request

DATATYPES = {"BOOL": np.dtype(np.bool_), "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16),
             "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64), "INT8": np.dtype(np.int8),
             "INT16": np.dtype(np.int16), "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
             "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64)}
# (little-endian on the wire: the binary extension and raw gRPC contents say so)
WIRE = {name: dtype.newbyteorder("<") for name, dtype in DATATYPES.items()}
MAX_RANK = 8
MAX_ELEMENTS = 1 << 31  # what a daemon accepts per tensor


def dtype_of(datatype: str, what: str) -> np.dtype:
    dtype = DATATYPES.get(datatype)
    if dtype is None:
        raise bad_request(f"{what}: datatype {datatype!r} is not supported; use one of {', '.join(DATATYPES)}")
    return dtype


NAMES = {dtype: name for name, dtype in DATATYPES.items()}  # (a dtype hashes as its equals: '<f4', float32)


def datatype_of(dtype: np.dtype) -> str:
    name = NAMES.get(dtype)
    if name is None:
        raise ValueError(f"no protocol datatype for {dtype}")
    return name


def check_shape(shape, what: str) -> tuple[int, ...]:
    """A tensor shape from a request: a list of at most MAX_RANK non-negative ints."""
    if not isinstance(shape, (list, tuple)) or len(shape) > MAX_RANK:
        raise bad_request(f"{what}: 'shape' must be a list of at most {MAX_RANK} integers, got {shape!r}"[:300])
    dims = []
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise bad_request(f"{what}: 'shape' must hold non-negative integers, got {list(shape)!r}"[:300])
        dims.append(d)
    # (each dim too: a zero dim makes the product 0, and numpy cannot shape an array with a dim past its index range)
    if math.prod(dims) > MAX_ELEMENTS or any(d > MAX_ELEMENTS for d in dims):
        raise bad_request(f"{what}: shape {dims} has more than {MAX_ELEMENTS} elements (or in one dimension)"[:300])
    return tuple(dims)


def from_json(data, datatype: str, shape: tuple, what: str) -> np.ndarray:
    """The JSON 'data' of a tensor (flat or nested, row-major) as an array of `shape`."""
    dtype = dtype_of(datatype, what)
    try:
        if dtype.kind == "f":  # numbers only (no strings or true/false), none past the datatype's range
            arr = np.array(data)
            if arr.size and arr.dtype.kind not in "iuf":
                raise ValueError
            with np.errstate(over="raise"):
                arr = arr.astype(dtype)
        else:  # integers and bools: exact values in range, never a silent wrap or truncation
            arr = np.array(data)
            if arr.size and not _fits(arr, dtype):
                raise ValueError
            arr = arr.astype(dtype)
    except (ValueError, TypeError, OverflowError, FloatingPointError):
        kind = "true/false" if datatype == "BOOL" else "numbers" if dtype.kind == "f" else "integers"
        raise bad_request(f"{what}: 'data' must be {datatype} values: a flat or nested list of {kind} in the "
                          f"datatype's range") from None
    expected = math.prod(shape)
    if arr.size != expected:
        raise bad_request(f"{what}: 'data' holds {arr.size} values but shape {list(shape)} needs {expected}")
    return arr.reshape(shape)


def _fits(arr: np.ndarray, dtype: np.dtype) -> bool:
    if dtype.kind == "b":
        return arr.dtype.kind == "b"
    if arr.dtype.kind not in "iu":
        return False
    info = np.iinfo(dtype)
    return int(arr.min()) >= info.min and int(arr.max()) <= info.max


def from_bytes(buf, datatype: str, shape: tuple, what: str) -> np.ndarray:
    """Raw little-endian tensor bytes (the binary extension, gRPC raw contents)."""
    dtype = WIRE[datatype] if datatype in WIRE else dtype_of(datatype, what)
    expected = math.prod(shape) * dtype.itemsize
    if len(buf) != expected:
        raise bad_request(f"{what}: {len(buf)} bytes of data but {datatype} {list(shape)} needs {expected}")
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


def to_bytes(arr: np.ndarray) -> bytes:
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return arr.tobytes()  # (C order, whatever the array's strides)
