"""TensorFlow values without TensorFlow: TensorProto -> numpy, and typed access to
a NodeDef's attributes.

A constant's `tensor_content` (raw little-endian bytes) becomes a numpy view of
the bytes protobuf already holds (no per-value Python objects); the `*_val`
fields follow TensorFlow's rule that a shorter list is padded with its last value
(a single value fills the whole shape). An attribute of the wrong kind (say a
string where TensorFlow defines a list of ints) is an error naming the node.
"""
from __future__ import annotations

import numpy as np

from core.errors import FrameworkError

# DataType enum value -> (numpy dtype, TensorProto field holding *_val values)
_DTYPES = {
    1: (np.float32, "float_val"), 2: (np.float64, "double_val"), 3: (np.int32, "int_val"),
    4: (np.uint8, "int_val"), 5: (np.int16, "int_val"), 6: (np.int8, "int_val"), 7: (object, "string_val"),
    9: (np.int64, "int64_val"), 10: (np.bool_, "bool_val"), 17: (np.uint16, "int_val"),
    19: (np.float16, "half_val"), 22: (np.uint32, "uint32_val"), 23: (np.uint64, "uint64_val"),
}
DT_BFLOAT16 = 14
_DTYPE_NAMES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8", 7: "string",
                8: "complex64", 9: "int64", 10: "bool", 14: "bfloat16", 17: "uint16", 18: "complex128",
                19: "float16", 20: "resource", 21: "variant", 22: "uint32", 23: "uint64"}
MAX_CONST_ELEMENTS = 1 << 31


def dtype_name(dt: int) -> str:
    return _DTYPE_NAMES.get(int(dt), "DataType {}".format(int(dt)))


def numpy_dtype(dt: int, where: str):
    dt = int(dt)
    if dt > 100:  # TF1 reference types hold the same values
        dt -= 100
    if dt == DT_BFLOAT16:
        return np.float32
    if dt not in _DTYPES:
        raise FrameworkError("{}: data type {} is not supported by the converter.", where, dtype_name(dt), faq=49)
    return _DTYPES[dt][0]


def shape_of(shape_proto) -> list[int] | None:
    """A TensorShapeProto as a list of dims (-1 unknown), None for an unknown rank."""
    if shape_proto.unknown_rank:
        return None
    return [int(d.size) for d in shape_proto.dim]


def tensor_to_numpy(tensor, where: str) -> np.ndarray:
    """The value of a TensorProto (a view of its bytes where it has tensor_content)."""
    dt = int(tensor.dtype)
    dims = shape_of(tensor.tensor_shape)
    if dims is None or any(d < 0 for d in dims):
        raise FrameworkError("{}: the constant has an undefined shape {}.", where, dims, faq=43)
    count = 1
    for d in dims:
        count *= d
    if count > MAX_CONST_ELEMENTS:
        raise FrameworkError("{}: the constant claims {} elements, more than a model file can hold.", where, count,
                             faq=43)
    dtype = numpy_dtype(dt, where)
    if dt == DT_BFLOAT16:
        return _bfloat16(tensor, dims, count, where)
    content = tensor.tensor_content
    if content:
        if dtype is object:
            raise FrameworkError("{}: a string constant in tensor_content form is not supported.", where, faq=43)
        itemsize = np.dtype(dtype).itemsize
        if len(content) != count * itemsize:
            raise FrameworkError("{}: the constant of shape {} ({}) needs {} bytes but holds {}. The model file is "
                                 "damaged.", where, dims, dtype_name(dt), count * itemsize, len(content), faq=43)
        return np.frombuffer(content, dtype=np.dtype(dtype).newbyteorder("<")).reshape(dims)
    field = _DTYPES[dt][1]
    values = getattr(tensor, field)
    if dtype is np.float16:
        raw = np.array(values, dtype=np.int64).astype(np.uint16).view(np.float16)
    elif dtype is object:
        raw = np.array(list(values), dtype=object)
    else:
        raw = np.array(values, dtype=dtype)
    return _fill(raw, dims, count, dtype, where)


def _fill(raw: np.ndarray, dims, count, dtype, where):
    if raw.size == count:
        return raw.reshape(dims)
    if raw.size > count:
        raise FrameworkError("{}: the constant of shape {} holds {} values.", where, dims, raw.size, faq=43)
    if raw.size == 0:
        return np.zeros(dims, dtype=dtype)
    # TensorFlow repeats the last value over the rest of the tensor
    out = np.empty(count, dtype=dtype)
    out[:raw.size] = raw
    out[raw.size:] = raw[-1]
    return out.reshape(dims)


def _bfloat16(tensor, dims, count, where):
    if tensor.tensor_content:
        if len(tensor.tensor_content) != 2 * count:
            raise FrameworkError("{}: the bfloat16 constant of shape {} holds {} bytes.", where, dims,
                                 len(tensor.tensor_content), faq=43)
        bits = np.frombuffer(tensor.tensor_content, dtype="<u2")
    else:
        bits = np.array(tensor.half_val, dtype=np.int64).astype(np.uint16)
    wide = (bits.astype(np.uint32) << 16).view(np.float32)
    return _fill(wide, dims, count, np.float32, where)


# --- attributes ---------------------------------------------------------------------
REQUIRED = object()

# kind -> (the oneof case of AttrValue, what to call it in messages)
_KINDS = {
    "s": ("s", "a string"), "i": ("i", "an int"), "f": ("f", "a float"), "b": ("b", "a bool"),
    "type": ("type", "a data type"), "shape": ("shape", "a shape"), "tensor": ("tensor", "a tensor"),
    "list_i": ("list", "a list of ints"), "list_f": ("list", "a list of floats"),
    "list_s": ("list", "a list of strings"), "list_type": ("list", "a list of data types"),
    "list_b": ("list", "a list of bools"), "list_shape": ("list", "a list of shapes"),
}
_CASE_NAMES = {"s": "a string", "i": "an int", "f": "a float", "b": "a bool", "type": "a data type",
               "shape": "a shape", "tensor": "a tensor", "list": "a list", "func": "a function",
               "placeholder": "a placeholder", None: "empty"}


def describe(node) -> str:
    return "Node '{}' ({})".format(node.soft_get("name"), node.soft_get("tf_op", node.soft_get("op")))


def attr(node, name: str, kind: str, default=REQUIRED):
    """A NodeDef attribute as a Python value of `kind` (see _KINDS); `default` when absent."""
    pb = node.pb
    if name not in pb.attr:
        if default is REQUIRED:
            raise FrameworkError("{} has no attribute '{}', which TensorFlow defines for this op. The graph is "
                                 "malformed.", describe(node), name, faq=43)
        return default
    value = pb.attr[name]
    case, expected = _KINDS[kind]
    have = value.WhichOneof("value")
    if have != case:
        raise FrameworkError("{}: attribute '{}' is {}, but TensorFlow defines it as {}. The graph is malformed.",
                             describe(node), name, _CASE_NAMES.get(have, have), expected, faq=43)
    if kind == "s":
        try:
            return value.s.decode("utf-8")
        except UnicodeDecodeError:
            raise FrameworkError("{}: attribute '{}' is not UTF-8 text.", describe(node), name, faq=43) from None
    if kind in ("i", "f", "b", "type"):
        return getattr(value, kind)
    if kind == "shape":
        return shape_of(value.shape)
    if kind == "tensor":
        return tensor_to_numpy(value.tensor, "{} attribute '{}'".format(describe(node), name))
    lst = value.list
    field = kind[5:]
    other = [f for f in ("s", "i", "f", "b", "type", "shape", "tensor", "func") if f != field and len(getattr(lst, f))]
    if other:
        raise FrameworkError("{}: attribute '{}' is a list of {} values, but TensorFlow defines it as {}.",
                             describe(node), name, other[0], expected, faq=43)
    items = list(getattr(lst, field))
    if field == "s":
        return [s.decode("utf-8", "replace") for s in items]
    if field == "shape":
        return [shape_of(s) for s in items]
    return items


_CASE_KIND = {"s": "s", "i": "i", "f": "f", "b": "b", "type": "type", "shape": "shape", "tensor": "tensor"}


def all_attrs(node) -> dict:
    """Every attribute of the node's NodeDef as a Python value, as it is (a list attribute
    by the kind of its items): what `mo-core extgen` extractors use to take all of them."""
    result = {}
    for name, value in node.pb.attr.items():
        case = value.WhichOneof("value")
        if case in _CASE_KIND:
            result[name] = attr(node, name, _CASE_KIND[case])
        elif case == "list":
            kinds = [f for f in ("s", "i", "f", "b", "type", "shape") if len(getattr(value.list, f))]
            result[name] = attr(node, name, "list_" + kinds[0]) if kinds else []
    return result
