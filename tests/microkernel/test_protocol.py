"""Encoding/decoding: round trips, zero copy, and strict rejection of bad input."""
from __future__ import annotations

import random

import msgpack
import numpy as np
import pytest
import zmq

from core.microkernel import (ALLOWED_DTYPES, Limits, ProtocolError, RemoteError, decode_reply,
                              decode_request, encode_error, encode_reply, encode_request)
from core.microkernel.protocol import PROTOCOL_VERSION

pytestmark = pytest.mark.timeout(60)

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64]
SHAPES = [(), (0,), (1,), (7,), (2, 3), (0, 5), (3, 0, 2), (2, 1, 3, 4), (1,) * 8]


def _sample(dtype, shape, rng):
    if dtype is np.bool_:
        return np.asarray(rng.random(shape) > 0.5)
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    if info is not None:
        return np.asarray(rng.integers(info.min, info.max, size=shape, dtype=dtype,
                                       endpoint=True))
    return np.asarray(rng.standard_normal(shape), dtype=dtype)


def _header(frames):
    return msgpack.unpackb(frames[0])


def _frames(header, *bufs):
    return [msgpack.packb(header, use_bin_type=True), *bufs]


def _req(**over):
    h = {"v": 1, "id": 5, "op": "echo", "args": {}, "arrays": []}
    h.update(over)
    return h


# ----------------------------------------------------------------------------- round trips

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_round_trip_dtypes_and_shapes(dtype, shape):
    rng = np.random.default_rng(0)
    a = _sample(dtype, shape, rng)
    req = decode_request(encode_request(7, "echo", {"x": a, "n": 3}))
    assert req.id == 7 and req.op == "echo" and req.args["n"] == 3
    out = req.args["x"]
    assert out.dtype == a.dtype and out.shape == a.shape
    assert np.array_equal(out, a)
    assert out is req.arrays[0]
    rep = decode_reply(encode_reply(7, {"y": a}))
    assert rep.ok and np.array_equal(rep.result["y"], a) and rep.result["y"].shape == shape


def test_allowed_dtypes_match_tested_ones():
    assert {np.dtype(d).str for d in DTYPES} == set(ALLOWED_DTYPES)


def test_nested_references_round_trip():
    a, b, c = np.arange(6.0).reshape(2, 3), np.ones(2, np.int32), np.zeros((), np.uint8)
    args = {"inputs": {"data": a, "more": [b, {"deep": c}]}, "name": "n", "t": (1, 2.5, None),
            "raw": b"\x00\xff", "flag": True, "np_scalar": np.float32(1.5)}
    req = decode_request(encode_request(1, "infer", args))
    assert np.array_equal(req.args["inputs"]["data"], a)
    assert np.array_equal(req.args["inputs"]["more"][0], b)
    assert req.args["inputs"]["more"][1]["deep"].shape == ()
    assert req.args["t"] == [1, 2.5, None] and req.args["raw"] == b"\x00\xff"
    assert req.args["flag"] is True and req.args["np_scalar"] == 1.5
    assert len(req.arrays) == 3


def test_positional_arrays_and_explicit_references():
    a, b, c = np.arange(3), np.arange(4.0), np.arange(5)
    frames = encode_request(2, "add", {"first": {"$array": 1}, "extra": c, "again": a,
                                       "twice": [c, c]}, arrays=[a, b])
    head = _header(frames)
    assert [m["shape"] for m in head["arrays"]] == [[3], [4], [5]]  # positional first
    # An array object already in the message is referenced, not sent again.
    assert head["args"] == {"first": {"$array": 1}, "extra": {"$array": 2},
                            "again": {"$array": 0}, "twice": [{"$array": 2}, {"$array": 2}]}
    req = decode_request(frames)
    assert req.args["first"] is req.arrays[1] and req.args["again"] is req.arrays[0]
    with pytest.raises(ProtocolError, match="bad array reference"):
        encode_request(2, "add", {"x": {"$array": 5}}, arrays=[a])


def test_big_endian_and_non_contiguous_are_normalized():
    a = np.arange(12, dtype=">i4").reshape(3, 4)
    t = np.arange(12.0).reshape(3, 4).T
    req = decode_request(encode_request(1, "x", {"a": a, "t": t}))
    assert req.args["a"].dtype.str == "<i4" and np.array_equal(req.args["a"], a)
    assert req.args["t"].flags.c_contiguous and np.array_equal(req.args["t"], t)


def test_error_reply_round_trip():
    rep = decode_reply(encode_error(9, "shape", "bad shape", 38, traceback="tb"))
    assert not rep.ok and rep.id == 9
    with pytest.raises(RemoteError) as ei:
        rep.unwrap()
    e = ei.value
    assert (e.kind, e.message, e.faq, e.traceback) == ("shape", "bad shape", 38, "tb")


@pytest.mark.parametrize("value", [object(), {1: 2}, np.array(["a"]),
                                   np.zeros(2, np.complex64), np.zeros(2, "M8[s]"),
                                   np.zeros((1,) * 9)])
def test_unencodable_values_raise_protocol_error(value):
    with pytest.raises(ProtocolError):
        encode_request(1, "x", {"v": value})


def test_bad_op_and_id_on_encode():
    for op in ("", "with space", "x" * 65, 3):
        with pytest.raises(ProtocolError):
            encode_request(1, op)
    for rid in (-1, 2**64, True, "1"):
        with pytest.raises(ProtocolError):
            encode_request(rid, "x")


def test_zero_copy_decode_over_real_socket(tmp_path):
    ctx = zmq.Context()
    try:
        a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
        ep = f"ipc://{tmp_path}/zc.sock"
        a.bind(ep)
        b.connect(ep)
        x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
        frames = encode_request(1, "echo", {"data": x})
        assert isinstance(frames[1], memoryview) and np.shares_memory(
            np.frombuffer(frames[1], np.uint8), x)  # zero copy on the send side too
        a.send_multipart(frames, copy=False)
        assert b.poll(5000)
        got = b.recv_multipart(copy=False)
        req = decode_request(got)
        y = req.args["data"]
        assert np.array_equal(x, y)
        base = y
        while isinstance(base, np.ndarray):
            base = base.base
        assert isinstance(base, memoryview) and base.obj is got[1]  # a view of the zmq.Frame
        assert not y.flags.writeable
    finally:
        a.close(0)
        b.close(0)
        ctx.term()


# ----------------------------------------------------------------------------- malformed input

def _bad_requests():
    ok = np.zeros(4, np.float32).tobytes()
    arr = {"dtype": "<f4", "shape": [4]}
    yield "garbage", [b"\x00\x01garbage\xff\xfe"]
    yield "empty message", []
    yield "empty header", [b""]
    yield "truncated msgpack", [msgpack.packb(_req())[:-3]]
    yield "extra bytes", [msgpack.packb(_req()) + b"\x00"]
    yield "header is a list", [msgpack.packb([1, 2, 3])]
    yield "header is an int", [msgpack.packb(7)]
    yield "no version", _frames({"id": 1, "op": "x"})
    yield "version 2", _frames(_req(v=2))
    yield "version as str", _frames(_req(v="1"))
    yield "version True", _frames(_req(v=True))
    yield "id missing", _frames({"v": 1, "op": "x"})
    yield "id str", _frames(_req(id="5"))
    yield "id float", _frames(_req(id=5.0))
    yield "id bool", _frames(_req(id=True))
    yield "id negative", _frames(_req(id=-1))
    yield "op missing", _frames({"v": 1, "id": 1})
    yield "op int", _frames(_req(op=3))
    yield "op with spaces", _frames(_req(op="rm -rf"))
    yield "op bytes", _frames(_req(op=b"echo"))
    yield "args list", _frames(_req(args=[1]))
    yield "args int key", [msgpack.packb({"v": 1, "id": 1, "op": "x", "args": {1: 2}})]
    yield "unknown field", _frames(_req(extra=1))
    yield "arrays not list", _frames(_req(arrays={"dtype": "<f4"}), ok)
    yield "array meta not map", _frames(_req(arrays=[["<f4", [4]]]), ok)
    yield "array meta extra key", _frames(_req(arrays=[dict(arr, order="C")]), ok)
    yield "bad dtype", _frames(_req(arrays=[{"dtype": "O", "shape": [4]}]), ok)
    yield "big-endian dtype", _frames(_req(arrays=[{"dtype": ">f4", "shape": [4]}]), ok)
    yield "complex dtype", _frames(_req(arrays=[{"dtype": "<c8", "shape": [2]}]), ok)
    yield "dtype not str", _frames(_req(arrays=[{"dtype": 4, "shape": [4]}]), ok)
    yield "shape not list", _frames(_req(arrays=[{"dtype": "<f4", "shape": 4}]), ok)
    yield "negative dim", _frames(_req(arrays=[{"dtype": "<f4", "shape": [-4]}]), ok)
    yield "float dim", _frames(_req(arrays=[{"dtype": "<f4", "shape": [4.0]}]), ok)
    yield "bool dim", _frames(_req(arrays=[{"dtype": "<f4", "shape": [True, 4]}]), ok)
    yield "rank 9", _frames(_req(arrays=[{"dtype": "<f4", "shape": [1] * 8 + [4]}]), ok)
    yield "huge declared shape", _frames(_req(arrays=[{"dtype": "<f4",
                                                      "shape": [2**40, 2**40]}]), ok)
    yield "shape too small", _frames(_req(arrays=[{"dtype": "<f4", "shape": [3]}]), ok)
    yield "missing frame", _frames(_req(arrays=[arr]))
    yield "extra frame", _frames(_req(arrays=[arr]), ok, ok)
    yield "frame without meta", _frames(_req(), ok)
    yield "ref out of range", _frames(_req(args={"x": {"$array": 1}}, arrays=[arr]), ok)
    yield "ref not int", _frames(_req(args={"x": {"$array": "0"}}, arrays=[arr]), ok)
    yield "ref with other keys", _frames(_req(args={"x": {"$array": 0, "y": 1}},
                                              arrays=[arr]), ok)
    yield "timestamp ext", [msgpack.packb(_req(args={"t": msgpack.Timestamp(1)}))]
    deep: dict = {}
    node = deep
    for _ in range(100):
        node["d"] = {}
        node = node["d"]
    yield "too deep", _frames(_req(args=deep))
    yield "very deep msgpack", [b"\x81\xa1a" * 5000 + b"\xc0"]
    yield "invalid utf-8 str", [msgpack.packb(_req())[:-1] + b"\xa2\xff\xfe"]
    yield "declared huge str", [b"\x81\xa1v\xdb\xff\xff\xff\xff"]
    yield "too many frames", _frames(_req()) + [b""] * 2000


@pytest.mark.parametrize("case", list(_bad_requests()), ids=lambda c: c[0])
def test_malformed_requests_raise_protocol_error(case):
    name, frames = case
    with pytest.raises(ProtocolError):
        decode_request(frames)


def _bad_replies():
    yield "ok not bool", _frames({"v": 1, "id": 1, "ok": 1, "result": {}})
    yield "error without kind", _frames({"v": 1, "id": 1, "ok": False,
                                         "error": {"message": "m"}})
    yield "error kind int", _frames({"v": 1, "id": 1, "ok": False,
                                     "error": {"kind": 1, "message": "m"}})
    yield "error faq str", _frames({"v": 1, "id": 1, "ok": False,
                                    "error": {"kind": "k", "message": "m", "faq": "7"}})
    yield "error with arrays", _frames({"v": 1, "id": 1, "ok": False,
                                        "error": {"kind": "k", "message": "m"}}, b"x")
    yield "ok with error", _frames({"v": 1, "id": 1, "ok": True, "result": {},
                                    "error": {"kind": "k", "message": "m"}})
    yield "result list", _frames({"v": 1, "id": 1, "ok": True, "result": []})
    yield "request as reply", encode_request(1, "echo")


@pytest.mark.parametrize("case", list(_bad_replies()), ids=lambda c: c[0])
def test_malformed_replies_raise_protocol_error(case):
    with pytest.raises(ProtocolError):
        decode_reply(case[1])


def test_limits_total_size_and_frames():
    small = Limits(max_message_bytes=1000, max_frames=3, max_header_bytes=200)
    big = np.zeros(300, np.float32)
    frames = encode_request(1, "x", {"a": big})
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decode_request(frames, small)
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        encode_request(1, "x", {"a": big}, limits=small)
    with pytest.raises(ProtocolError, match="frames exceed"):
        decode_request(encode_request(1, "x", {"a": [np.zeros(1) for _ in range(3)]}), small)
    with pytest.raises(ProtocolError, match="header of"):
        decode_request(encode_request(1, "x", {"s": "y" * 300}), small)
    decode_request(encode_request(1, "x", {"a": np.zeros(10)}), small)  # within limits


def _equal(a, b) -> bool:
    """Deep equality of decoded values (arrays by dtype, shape and content)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and a.tobytes() == b.tobytes())
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _reencoded(decode, msg):
    """`msg` (a decoded Request or Reply) encoded again and decoded: the same message
    if the decoder handed out only what the schema allows."""
    if decode is decode_request:
        return decode_request(encode_request(msg.id, msg.op, msg.args))
    if msg.ok:
        return decode_reply(encode_reply(msg.id, msg.result))
    return decode_reply(encode_error(msg.id, msg.error.kind, msg.error.message, msg.error.faq,
                                     msg.error.traceback))


def test_random_mutations_only_ever_raise_protocol_error():
    """Fuzz: bit flips, truncations and splices of valid messages either decode to
    a well-formed message (one that encodes and decodes to itself) or raise
    ProtocolError - never any other exception. Both outcomes occur (fixed seed)."""
    rng = random.Random(1234)
    good = [
        encode_request(3, "infer", {"inputs": {"d": np.arange(6, dtype=np.float32).reshape(2, 3)},
                                    "s": "abc", "l": [1, 2.5, None, True]}),
        encode_reply(3, {"out": np.ones((2, 2), np.int16), "n": 4}),
        encode_error(3, "user", "msg", 12),
    ]
    decoded = rejected = 0
    for i in range(3000):
        frames = [bytes(f) for f in rng.choice(good)]
        head = bytearray(frames[0])
        op = rng.randrange(4)
        if op == 0:
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(len(head))
                head[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            head = head[: rng.randrange(len(head))]
        elif op == 2:
            pos = rng.randrange(len(head))
            head[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            head = bytearray(rng.randbytes(rng.randint(0, 64)))
        frames[0] = bytes(head)
        if rng.random() < 0.2 and len(frames) > 1:
            frames[1] = frames[1][: rng.randrange(len(frames[1]) + 1)]
        for decode in (decode_request, decode_reply):
            try:
                msg = decode(frames)
            except ProtocolError:
                rejected += 1
                continue
            decoded += 1
            again = _reencoded(decode, msg)
            assert again.id == msg.id and _equal(vars(again).get("args", vars(again).get("result")),
                                                 vars(msg).get("args", vars(msg).get("result")))
            if decode is decode_reply and not msg.ok:
                assert (again.error.kind, again.error.message, again.error.faq) == \
                    (msg.error.kind, msg.error.message, msg.error.faq)
    # the mutations both get through (a flipped bit in a string) and are refused
    assert decoded > 10 and rejected > 3000, (decoded, rejected)


@pytest.mark.parametrize("version", [0, 2, "1", 1.0, True, None])
def test_other_protocol_versions_are_refused(version):
    """Both sides check the version of every message, and name both versions."""
    assert _header(encode_request(1, "x"))["v"] == PROTOCOL_VERSION
    for header, decode in (({"id": 1, "op": "x"}, decode_request), ({"id": 1, "ok": True}, decode_reply)):
        head = msgpack.packb(dict(header, v=version))
        with pytest.raises(ProtocolError, match=f"unsupported protocol version .* speaks {PROTOCOL_VERSION}"):
            decode([head])


def test_misaligned_frames_decode_to_aligned_arrays():
    x = np.arange(5, dtype=np.float64)
    head = encode_request(1, "x", {"x": x})[0]
    padded = memoryview(b"\x00" + x.tobytes())[1:]  # data at an odd address
    req = decode_request([head, padded])
    assert req.args["x"].flags.aligned and np.array_equal(req.args["x"], x)


@pytest.mark.parametrize("header, needle", [
    ({"v": 1, "id": 1, "op": "x", "args": {"zeros": [0] * 15_000_000}}, "max_array_len"),
    ({"v": 1, "id": 1, "op": "x", "args": {"m": {str(i): 0 for i in range(200_000)}}}, "max_map_len"),
    ({"v": 1, "id": 1, "op": "x", "args": {"l": [[0] * 1000] * 200}}, "limit of 131072"),
    ({"v": 1, "id": 1, "op": "x", "args": {"l": [[]] * 100_000, "m": [{}] * 100_000}}, "limit of 131072"),
])
def test_headers_are_capped_in_elements(header, needle):
    """Arrays travel as frames, so a header never needs many elements; walking
    millions of them blocked the receiving thread for seconds."""
    head = msgpack.packb(header)
    for decode in (decode_request, decode_reply):
        with pytest.raises(ProtocolError, match=needle):
            decode([head])


def test_nested_msgpack_gets_the_same_limits():
    from core.microkernel import unpack_limited
    assert unpack_limited(msgpack.packb({"a": [1, 2]}), what="spec") == {"a": [1, 2]}
    with pytest.raises(ProtocolError, match="spec of 20 bytes exceeds the limit of 10"):
        unpack_limited(b"\x00" * 20, what="spec", max_bytes=10)
    with pytest.raises(ProtocolError, match="spec exceeds the limit"):
        unpack_limited(msgpack.packb([[1] * 1000] * 200), what="spec")
    with pytest.raises(ProtocolError, match="spec is not valid msgpack"):
        unpack_limited(msgpack.packb(msgpack.ExtType(1, b"x")), what="spec")
