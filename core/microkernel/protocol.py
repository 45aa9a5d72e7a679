"""Wire protocol: encoding and strict decoding of microkernel messages.

A message is a ZeroMQ multipart message `[header, buf0, buf1, ...]`:

* `header` is a msgpack map.
  Request: `{"v": 1, "id": int, "op": str, "args": map, "arrays": [meta...]}`
  Reply:   `{"v": 1, "id": int, "ok": true, "result": map, "arrays": [meta...]}`
           `{"v": 1, "id": int, "ok": false,
             "error": {"kind": str, "message": str, "faq": int|nil[, "traceback": str]}}`
  where each array meta is `{"dtype": "<f4", "shape": [1, 3, 224, 224]}`.
* `buf<i>` is the raw, C-ordered, little-endian bytes of array i (no pickle, ever).

Array reference convention: inside `args` / `result`, an array is a map with the
single key "$array" whose value is its position in `arrays`, e.g.
`{"inputs": {"data": {"$array": 0}}}`. Encoders replace every numpy array found in a
nested dict/list by such a reference (appending it after any arrays passed
positionally), decoders replace every reference by the decoded array, so nested
structures of arrays round-trip. A map with a "$array" key is therefore reserved.

Zero copy: on send, array frames are memoryviews of C-contiguous arrays (pyzmq
sends frames >= 64 KiB without copying when `copy=False`); on receive, arrays are
`np.frombuffer` views over the zmq.Frame buffers (a frame that libzmq left
misaligned for its dtype - in practice only small ones - is copied instead).
Decoded arrays are READ-ONLY (the buffer may be shared with the transport);
`.copy()` one to modify it.

Decoding treats its input as untrusted: size limits before unpacking, msgpack
limits while unpacking, then a strict schema check of every field. Every problem is
a ProtocolError, never another exception type.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import msgpack
import numpy as np

from .errors import ProtocolError, RemoteError

PROTOCOL_VERSION = 1
ARRAY_REF = "$array"

# Canonical numpy dtype strings accepted on the wire: fixed-size numbers and bool,
# little-endian (1-byte types have no byte order, numpy writes "|").
ALLOWED_DTYPES = frozenset(
    ["|b1", "|i1", "|u1", "<i2", "<i4", "<i8", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8"]
)

_OP_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")
_MAX_ID = 2**64 - 1
_REQUEST_KEYS = frozenset(["v", "id", "op", "args", "arrays"])
_REPLY_KEYS = frozenset(["v", "id", "ok", "result", "arrays", "error"])
_ERROR_KEYS = frozenset(["kind", "message", "faq", "traceback"])


@dataclass(frozen=True)
class Limits:
    """Upper bounds applied when decoding (and, for sanity, when encoding)."""

    max_message_bytes: int = 1 << 30  # all frames together
    max_frames: int = 1025  # header + 1024 arrays
    max_header_bytes: int = 16 << 20
    max_depth: int = 32  # nesting of maps/lists in args/result
    max_rank: int = 8
    # maps, lists and their entries together, in one header: arrays travel as frames,
    # so a real header holds a few hundred; walking millions in Python would block
    # the receiving thread for seconds
    max_elements: int = 1 << 17


DEFAULT_LIMITS = Limits()


@dataclass
class Request:
    id: int
    op: str
    args: dict = field(default_factory=dict)  # "$array" references resolved
    arrays: list = field(default_factory=list)  # all arrays, by position


@dataclass
class Reply:
    id: int
    ok: bool
    result: dict = field(default_factory=dict)
    arrays: list = field(default_factory=list)
    error: RemoteError | None = None

    def unwrap(self) -> tuple[dict, list]:
        """(result, arrays) of a success reply; raises the RemoteError otherwise."""
        if not self.ok:
            assert self.error is not None
            raise self.error
        return self.result, self.arrays


# --------------------------------------------------------------------------- helpers

def frame_buffer(frame: Any) -> memoryview:
    """A flat byte memoryview of a frame (zmq.Frame, bytes, memoryview, array)."""
    if type(frame) is bytes:  # (a received datagram: flat bytes already)
        return memoryview(frame)
    buf = getattr(frame, "buffer", None)  # zmq.Frame exposes its data here
    if buf is None:
        try:
            buf = memoryview(frame)
        except TypeError as exc:
            raise ProtocolError(f"frame of type {type(frame).__name__} is not a buffer") from exc
    if buf.ndim != 1 or buf.format != "B":
        buf = buf.cast("B")
    return buf


def _path(parent: str, key: Any) -> str:
    return f"{parent}[{key!r}]" if isinstance(key, int) else f"{parent}.{key}"


def _array_meta(arr: np.ndarray, limits: Limits, where: str) -> tuple[np.ndarray, dict]:
    """The wire form of an array: (C-contiguous little-endian array, meta)."""
    dt = arr.dtype
    if dt.byteorder == ">":
        arr = arr.astype(dt.newbyteorder("<"))
        dt = arr.dtype
    if dt.str not in ALLOWED_DTYPES:
        raise ProtocolError(
            f"{where}: dtype {dt} cannot be sent; allowed: bool, int8-64, uint8-64, float16-64")
    if arr.ndim > limits.max_rank:
        raise ProtocolError(f"{where}: rank {arr.ndim} exceeds the limit of {limits.max_rank}")
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    return arr, {"dtype": dt.str, "shape": list(arr.shape)}


def _externalize(value: Any, arrays: list, where: Any, depth: int, limits: Limits,
                 index: dict) -> Any:
    """Copy of `value` with numpy arrays moved into `arrays` and replaced by refs.
    `index` maps id(array) -> position, so an array object that is passed
    positionally and also referenced (or referenced twice) is sent only once.
    `where` as in _resolve (text only for a report: every request is encoded by it)."""
    if type(value) in _SCALARS:
        return value
    if depth > limits.max_depth:
        raise ProtocolError(f"{_where(where)}: nesting deeper than {limits.max_depth}")
    if isinstance(value, np.ndarray):
        pos = index.get(id(value))
        if pos is None:
            pos = index[id(value)] = len(arrays)
            arrays.append(value)  # keeps the object alive, so its id stays unique
        return {ARRAY_REF: pos}
    if isinstance(value, (bool, int, float, str, bytes)):  # subclasses
        return value
    if isinstance(value, np.generic):  # numpy scalars travel as plain msgpack values
        return _externalize(value.item(), arrays, where, depth, limits, index)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ProtocolError(f"{_where(where)}: map keys must be str, got {type(k).__name__}")
            out[k] = _externalize(v, arrays, (where, k), depth + 1, limits, index)
        return out
    if isinstance(value, (list, tuple)):
        return [_externalize(v, arrays, (where, i), depth + 1, limits, index)
                for i, v in enumerate(value)]
    raise ProtocolError(f"{_where(where)}: values of type {type(value).__name__} cannot be sent")


def _check_refs(value: Any, n_arrays: int, where: Any) -> None:
    """Explicit {"$array": i} references written by the caller must be in range."""
    if isinstance(value, dict):
        if ARRAY_REF in value:
            idx = value[ARRAY_REF]
            if len(value) != 1 or isinstance(idx, bool) or not isinstance(idx, int) \
                    or not 0 <= idx < n_arrays:
                raise ProtocolError(f"{_where(where)}: bad array reference {value!r} "
                                    f"({n_arrays} arrays in the message)")
            return
        for k, v in value.items():
            _check_refs(v, n_arrays, (where, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_refs(v, n_arrays, (where, i))


def _encode(header: dict, body_key: str, body: dict | None, arrays: Sequence | None,
            limits: Limits) -> list:
    if body is not None and not isinstance(body, dict):
        raise ProtocolError(f"{body_key} must be a dict, got {type(body).__name__}")
    all_arrays: list = []
    for i, a in enumerate(arrays or ()):
        if not isinstance(a, np.ndarray):
            raise ProtocolError(f"arrays[{i}] is a {type(a).__name__}, not a numpy array")
        all_arrays.append(a)
    index = {id(a): i for i, a in enumerate(all_arrays)}
    body = _externalize(body or {}, all_arrays, body_key, 0, limits, index)
    _check_refs(body, len(all_arrays), body_key)
    if len(all_arrays) + 1 > limits.max_frames:
        raise ProtocolError(f"{len(all_arrays)} arrays exceed the limit of {limits.max_frames - 1}")
    metas, frames = [], []
    for i, a in enumerate(all_arrays):
        wire, meta = _array_meta(a, limits, f"array {i}")
        metas.append(meta)
        frames.append(memoryview(wire.reshape(-1).view(np.uint8)))
    header[body_key] = body
    header["arrays"] = metas
    try:
        head = msgpack.packb(header, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"cannot encode {body_key}: {exc}") from exc
    total = len(head) + sum(f.nbytes for f in frames)
    if total > limits.max_message_bytes:
        raise ProtocolError(f"message of {total} bytes exceeds the limit of "
                            f"{limits.max_message_bytes} bytes")
    return [head, *frames]


# --------------------------------------------------------------------------- encoding

def encode_request(req_id: int, op: str, args: dict | None = None,
                   arrays: Sequence[np.ndarray] | None = None,
                   limits: Limits = DEFAULT_LIMITS) -> list:
    """Frames of a request. numpy arrays inside `args` become "$array" refs."""
    _check_id(req_id)
    if not isinstance(op, str) or not _OP_RE.match(op):
        raise ProtocolError(f"bad op name {op!r}")
    header = {"v": PROTOCOL_VERSION, "id": req_id, "op": op}
    return _encode(header, "args", args, arrays, limits)


def encode_reply(req_id: int, result: dict | None = None,
                 arrays: Sequence[np.ndarray] | None = None,
                 limits: Limits = DEFAULT_LIMITS) -> list:
    """Frames of a success reply. numpy arrays inside `result` become refs."""
    _check_id(req_id)
    header = {"v": PROTOCOL_VERSION, "id": req_id, "ok": True}
    return _encode(header, "result", result, arrays, limits)


def encode_error(req_id: int, kind: str, message: str, faq: int | None = None,
                 traceback: str | None = None) -> list:
    """Frames of an error reply (never carries arrays)."""
    _check_id(req_id)
    error = {"kind": str(kind), "message": str(message),
             "faq": faq if isinstance(faq, int) and not isinstance(faq, bool) else None}
    if traceback:
        error["traceback"] = str(traceback)
    header = {"v": PROTOCOL_VERSION, "id": req_id, "ok": False, "error": error}
    return [msgpack.packb(header, use_bin_type=True)]


def _check_id(req_id: Any) -> None:
    if isinstance(req_id, bool) or not isinstance(req_id, int) or not 0 <= req_id <= _MAX_ID:
        raise ProtocolError(f"request id must be an int in [0, 2**64), got {req_id!r}")


# --------------------------------------------------------------------------- decoding

def _split_frames(frames: Sequence, limits: Limits) -> list[memoryview]:
    if not isinstance(frames, (list, tuple)) or not frames:
        raise ProtocolError("empty message (no header frame)")
    if len(frames) > limits.max_frames:
        raise ProtocolError(f"{len(frames)} frames exceed the limit of {limits.max_frames}")
    bufs = [frame_buffer(f) for f in frames]
    total = sum(b.nbytes for b in bufs)
    if total > limits.max_message_bytes:
        raise ProtocolError(f"message of {total} bytes exceeds the limit of "
                            f"{limits.max_message_bytes} bytes")
    return bufs


class _TooManyElements(Exception):
    pass


def unpack_limited(buf: Any, limits: Limits = DEFAULT_LIMITS, *, what: str = "header",
                   max_bytes: int | None = None) -> Any:
    """Unpack untrusted msgpack bytes with every limit of the protocol: its size,
    each container's length, the total number of maps, lists and entries
    (`limits.max_elements`, counted while unpacking: a hook sees each container
    as msgpack builds it), no ext types. Any problem is a ProtocolError. Used for
    headers and for msgpack nested inside a message (e.g. shared-memory specs)."""
    buf = frame_buffer(buf)
    n = buf.nbytes
    cap = limits.max_header_bytes if max_bytes is None else max_bytes
    if n > cap:
        raise ProtocolError(f"{what} of {n} bytes exceeds the limit of {cap}")
    budget = limits.max_elements
    longest = min(n, budget)

    def count(container):
        nonlocal budget
        budget -= len(container) + 1
        if budget < 0:
            raise _TooManyElements
        return container
    try:
        return msgpack.unpackb(
            buf, raw=False, use_list=True, strict_map_key=True,
            max_str_len=n, max_bin_len=n, max_array_len=longest, max_map_len=longest,
            max_ext_len=0,  # no ext types (timestamps included): nothing to trust there
            list_hook=count, object_hook=count)
    except _TooManyElements:
        raise ProtocolError(f"{what} exceeds the limit of {limits.max_elements} maps, lists "
                            f"and entries (send bulk data as arrays)") from None
    except Exception as exc:  # msgpack raises ValueError, TypeError, StackError, ...
        raise ProtocolError(f"{what} is not valid msgpack: {type(exc).__name__}: "
                            f"{str(exc)[:200]}") from None


def _unpack_map(buf: memoryview, limits: Limits) -> dict:
    header = unpack_limited(buf, limits)
    if not isinstance(header, dict):
        raise ProtocolError(f"header must be a map, got {type(header).__name__}")
    return header


def _unpack_header(buf: memoryview, limits: Limits) -> dict:
    header = _unpack_map(buf, limits)
    v = header.get("v")
    if type(v) is not int or v != PROTOCOL_VERSION:  # not True, not 1.0
        raise ProtocolError(f"unsupported protocol version {v!r} (this side speaks "
                            f"{PROTOCOL_VERSION})")
    rid = header.get("id")
    if isinstance(rid, bool) or not isinstance(rid, int) or not 0 <= rid <= _MAX_ID:
        raise ProtocolError(f"header field 'id' must be an int in [0, 2**64), got {rid!r}")
    return header


def _decode_arrays(metas: Any, bufs: list[memoryview], limits: Limits) -> list:
    if not isinstance(metas, list):
        raise ProtocolError(f"header field 'arrays' must be a list, got {type(metas).__name__}")
    if len(metas) != len(bufs):
        raise ProtocolError(f"header declares {len(metas)} arrays but the message has "
                            f"{len(bufs)} array frames")
    arrays = []
    for i, (meta, buf) in enumerate(zip(metas, bufs)):
        if not isinstance(meta, dict) or set(meta) != {"dtype", "shape"}:
            raise ProtocolError(f"arrays[{i}] must be a map with exactly 'dtype' and 'shape'")
        dtype, shape = meta["dtype"], meta["shape"]
        if not isinstance(dtype, str) or dtype not in ALLOWED_DTYPES:
            raise ProtocolError(f"arrays[{i}]: dtype {dtype!r} is not allowed "
                                f"(allowed: {', '.join(sorted(ALLOWED_DTYPES))})")
        if not isinstance(shape, list) or len(shape) > limits.max_rank:
            raise ProtocolError(f"arrays[{i}]: shape must be a list of at most "
                                f"{limits.max_rank} dims, got {shape!r:.80}")
        for d in shape:
            if isinstance(d, bool) or not isinstance(d, int) or d < 0:
                raise ProtocolError(f"arrays[{i}]: shape {shape!r:.80} has a bad dim {d!r}")
        dt = np.dtype(dtype)
        expected = math.prod(shape) * dt.itemsize  # Python ints: no overflow
        if expected != buf.nbytes:
            raise ProtocolError(f"arrays[{i}]: {dtype} {shape!r:.80} needs {expected} bytes "
                                f"but its frame has {buf.nbytes}")
        arr = np.frombuffer(buf, dtype=dt)
        if not arr.flags.aligned:
            # libzmq packs small frames into its receive buffer at any offset; copy
            # those (cheap) so consumers always get naturally aligned data. Large
            # frames get their own allocation and stay zero-copy.
            arr = arr.copy()
        arr = arr.reshape(shape)
        arr.flags.writeable = False
        arrays.append(arr)
    return arrays


_SCALARS = (type(None), bool, int, float, str, bytes)


def _resolve(value: Any, arrays: list, where: Any, depth: int, limits: Limits) -> Any:
    """Check that `value` holds only msgpack basics and resolve "$array" refs.
    `where` is a str or a (parent, key) pair, turned into text only for a report."""
    if type(value) in _SCALARS:
        return value
    if depth > limits.max_depth:
        raise ProtocolError(f"{_where(where)}: nesting deeper than {limits.max_depth}")
    if isinstance(value, dict):
        if ARRAY_REF in value:
            idx = value[ARRAY_REF]
            if len(value) != 1 or isinstance(idx, bool) or not isinstance(idx, int) \
                    or not 0 <= idx < len(arrays):
                raise ProtocolError(f"{_where(where)}: bad array reference {value!r:.80} "
                                    f"({len(arrays)} arrays in the message)")
            return arrays[idx]
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ProtocolError(f"{_where(where)}: map keys must be str, got {type(k).__name__}")
            out[k] = _resolve(v, arrays, (where, k), depth + 1, limits)
        return out
    if isinstance(value, list):
        return [_resolve(v, arrays, (where, i), depth + 1, limits) for i, v in enumerate(value)]
    raise ProtocolError(f"{_where(where)}: unexpected value of type {type(value).__name__}")


def _where(where: Any) -> str:
    if isinstance(where, tuple):
        return _path(_where(where[0]), where[1])
    return where


def decode_request(frames: Sequence, limits: Limits = DEFAULT_LIMITS) -> Request:
    """Parse untrusted request frames; raises ProtocolError on any defect."""
    bufs = _split_frames(frames, limits)
    header = _unpack_header(bufs[0], limits)
    extra = set(header) - _REQUEST_KEYS
    if extra:
        raise ProtocolError(f"request header has unknown fields {sorted(map(str, extra))}")
    op = header.get("op")
    if not isinstance(op, str) or not _OP_RE.match(op):
        raise ProtocolError(f"header field 'op' must be a verb name, got {op!r:.80}")
    args = header.get("args", {})
    if not isinstance(args, dict):
        raise ProtocolError(f"header field 'args' must be a map, got {type(args).__name__}")
    arrays = _decode_arrays(header.get("arrays", []), bufs[1:], limits)
    args = _resolve(args, arrays, "args", 0, limits)
    return Request(header["id"], op, args, arrays)


def decode_reply(frames: Sequence, limits: Limits = DEFAULT_LIMITS) -> Reply:
    """Parse untrusted reply frames; raises ProtocolError on any defect.
    An error reply is returned (with `.error` set), not raised: see Reply.unwrap."""
    bufs = _split_frames(frames, limits)
    header = _unpack_header(bufs[0], limits)
    extra = set(header) - _REPLY_KEYS
    if extra:
        raise ProtocolError(f"reply header has unknown fields {sorted(map(str, extra))}")
    ok = header.get("ok")
    if not isinstance(ok, bool):
        raise ProtocolError(f"header field 'ok' must be a bool, got {ok!r:.80}")
    if ok:
        if "error" in header:
            raise ProtocolError("a success reply must not carry 'error'")
        result = header.get("result", {})
        if not isinstance(result, dict):
            raise ProtocolError(f"header field 'result' must be a map, got {type(result).__name__}")
        arrays = _decode_arrays(header.get("arrays", []), bufs[1:], limits)
        return Reply(header["id"], True, _resolve(result, arrays, "result", 0, limits), arrays)
    if "result" in header or header.get("arrays") or len(bufs) > 1:
        raise ProtocolError("an error reply must not carry a result or arrays")
    err = header.get("error")
    if not isinstance(err, dict) or not set(err) <= _ERROR_KEYS \
            or not isinstance(err.get("kind"), str) or not isinstance(err.get("message"), str):
        raise ProtocolError("header field 'error' must be a map with str 'kind' and 'message'")
    faq = err.get("faq")
    if faq is not None and (isinstance(faq, bool) or not isinstance(faq, int)):
        raise ProtocolError(f"error field 'faq' must be an int or nil, got {faq!r:.80}")
    tb = err.get("traceback")
    if tb is not None and not isinstance(tb, str):
        raise ProtocolError("error field 'traceback' must be a str")
    return Reply(header["id"], False,
                 error=RemoteError(err["kind"], err["message"], faq, traceback=tb))


def peek_id(frames: Sequence, limits: Limits = DEFAULT_LIMITS) -> int | None:
    """Best-effort request id of a message that failed to decode (to address an
    error reply to it); None when even that cannot be recovered."""
    try:
        if not frames:
            return None
        rid = _unpack_map(frame_buffer(frames[0]), limits).get("id")
    except ProtocolError:
        return None
    if isinstance(rid, bool) or not isinstance(rid, int) or not 0 <= rid <= _MAX_ID:
        return None
    return rid
