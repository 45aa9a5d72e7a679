"""Fast reader of a .caffemodel's blobs.

Decoding the weights through protobuf message objects turns every float into a
Python object (seconds for AlexNet's 61M values). The blobs are packed floats in
the protobuf wire format, so this walks the wire format itself, checking every
length against the buffer, and returns numpy views over the file's bytes.
Only NetParameter -> layer(s) -> name / blobs -> shape / legacy dims / data /
double_data are read; every other field is skipped by its wire type.
"""
from __future__ import annotations

import mmap
from dataclasses import dataclass

import numpy as np

from core.errors import FrameworkError

# field numbers from caffe.proto
NET_LAYER, NET_LAYERS_V1 = 100, 2
LAYER_NAME, LAYER_BLOBS = 1, 7
V1_NAME, V1_BLOBS = 4, 6
BLOB_NUM, BLOB_CHANNELS, BLOB_HEIGHT, BLOB_WIDTH, BLOB_DATA, BLOB_SHAPE, BLOB_DOUBLE = 1, 2, 3, 4, 5, 7, 8
SHAPE_DIM = 1

VARINT, I64, LEN, I32 = 0, 1, 2, 5


class WireError(Exception):
    pass


def _varint(buf, pos, end):
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError("truncated or overlong varint at byte {}".format(pos))
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf, pos, end):
    """Yields (field number, wire type, value or (start, stop)) within [pos, end)."""
    while pos < end:
        key, pos = _varint(buf, pos, end)
        field, wtype = key >> 3, key & 7
        if wtype == VARINT:
            value, pos = _varint(buf, pos, end)
            yield field, wtype, value
        elif wtype == LEN:
            length, pos = _varint(buf, pos, end)
            if length > end - pos:
                raise WireError("field {} claims {} bytes but only {} remain".format(field, length, end - pos))
            yield field, wtype, (pos, pos + length)
            pos += length
        elif wtype == I32:
            if end - pos < 4:
                raise WireError("truncated 32-bit field {}".format(field))
            yield field, wtype, (pos, pos + 4)
            pos += 4
        elif wtype == I64:
            if end - pos < 8:
                raise WireError("truncated 64-bit field {}".format(field))
            yield field, wtype, (pos, pos + 8)
            pos += 8
        else:
            raise WireError("unsupported wire type {} for field {} at byte {}".format(wtype, field, pos))


def _packed_varints(buf, start, stop):
    values, pos = [], start
    while pos < stop:
        v, pos = _varint(buf, pos, stop)
        values.append(v if v < (1 << 63) else v - (1 << 64))
    return values


@dataclass
class Blob:
    shape: tuple
    data: np.ndarray  # flat float32 (a view over the file where possible)


def _blob(buf, start, stop) -> Blob:
    dims, legacy, data, floats = None, {}, [], []
    for field, wtype, value in _fields(buf, start, stop):
        if field == BLOB_SHAPE and wtype == LEN:
            dims = []
            for f2, w2, v2 in _fields(buf, *value):
                if f2 == SHAPE_DIM:
                    dims.extend(_packed_varints(buf, *v2) if w2 == LEN else [v2])
        elif field in (BLOB_NUM, BLOB_CHANNELS, BLOB_HEIGHT, BLOB_WIDTH) and wtype == VARINT:
            legacy[field] = value
        elif field == BLOB_DATA:
            if wtype == LEN:
                a, b = value
                if (b - a) % 4:
                    raise WireError("packed float data of {} bytes".format(b - a))
                data.append(np.frombuffer(buf, dtype="<f4", count=(b - a) // 4, offset=a))
            elif wtype == I32:
                floats.append(np.frombuffer(buf, dtype="<f4", count=1, offset=value[0]))
        elif field == BLOB_DOUBLE:
            if wtype == LEN:
                a, b = value
                if (b - a) % 8:
                    raise WireError("packed double data of {} bytes".format(b - a))
                data.append(np.frombuffer(buf, dtype="<f8", count=(b - a) // 8, offset=a).astype(np.float32))
            elif wtype == I64:
                floats.append(np.frombuffer(buf, dtype="<f8", count=1, offset=value[0]).astype(np.float32))
    parts = data + floats
    flat = parts[0] if len(parts) == 1 else (np.concatenate(parts).astype(np.float32) if parts
                                              else np.zeros(0, np.float32))
    if dims is None and legacy:
        dims = [legacy.get(f, 0) for f in (BLOB_NUM, BLOB_CHANNELS, BLOB_HEIGHT, BLOB_WIDTH)]
    elif dims is None:  # Caffe writes a 0-D blob (PReLU channel_shared) with no shape at all
        dims = []
    return Blob(tuple(int(d) for d in dims), flat)


def read_caffemodel_blobs(path: str, max_bytes: int) -> dict[str, list[Blob]]:
    """{layer name: [Blob, ...]} for every layer of the weights file (first wins)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size > max_bytes:
                raise FrameworkError("The caffemodel file '{}' is {} bytes, larger than the {} bytes allowed.",
                                     path, size, max_bytes)
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except OSError as exc:
        raise FrameworkError("Cannot read the weights file '{}': {}", path, exc.strerror) from None
    result: dict[str, list[Blob]] = {}
    try:
        for field, wtype, value in _fields(buf, 0, len(buf)):
            if wtype != LEN or field not in (NET_LAYER, NET_LAYERS_V1):
                continue
            name_field, blobs_field = (LAYER_NAME, LAYER_BLOBS) if field == NET_LAYER else (V1_NAME, V1_BLOBS)
            name, blobs = None, []
            for f2, w2, v2 in _fields(buf, *value):
                if f2 == name_field and w2 == LEN:
                    name = bytes(buf[v2[0]:v2[1]]).decode("utf-8", "replace")
                elif f2 == blobs_field and w2 == LEN:
                    blobs.append(_blob(buf, *v2))
            if name is not None and name not in result:
                result[name] = blobs
    except WireError as exc:
        raise FrameworkError(
            "Cannot read the weights file '{}': it is not a valid .caffemodel ({}). The file may be truncated or it "
            "is a text prototxt; re-download or re-save it (FAQ #2 tells how to make a bare caffemodel).", path,
            exc, faq=11) from None
    if not result:
        raise FrameworkError("The weights file '{}' has no layers: it is not a trained .caffemodel.", path, faq=7)
    return result


def blob_array(blob: Blob, where: str) -> np.ndarray:
    count = int(np.prod(blob.shape)) if blob.shape else 1
    if blob.data.size != count:
        raise FrameworkError(
            "The weights of layer '{}' have {} values but their shape {} needs {}. The .caffemodel is truncated or "
            "does not belong to this prototxt.", where, blob.data.size, list(blob.shape), count, faq=11)
    return blob.data.reshape(blob.shape)
