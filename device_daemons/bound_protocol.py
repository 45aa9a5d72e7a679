"""Bound requests: how a local client runs a network on the daemon (both sides use
this module: the daemon's table is service/bound_table.py, the client's side
client/bound_client.py).

A local client binds a network to a shared-memory slot once: `infer_bind`
{handle, shm} (the shm spec: where the inputs are and where the outputs may go)
-> {binding, outputs: placed spec}. The daemon checks the handle and the slot
then, keeps the views of the slot, and answers with where each output will be.
From then on one request is a raw datagram on the daemon's local carrier
(core/microkernel/direct.py, raw verb RAW_INFER): 8 bytes (the binding id) in, 12
bytes (status, compute time, flags) out, and no msgpack on either side; the inputs
and outputs are in the slot. The flag SPARE_CPU says that the request left a CPU free
(a one-thread team running alone on a machine of several): only then may a client
poll for its next reply on a CPU of its own (request_path.py) - polling beside a team
of every CPU takes a CPU from the computation.

Statuses: BOUND_OK (the outputs are in the slot), BOUND_UNKNOWN (no such binding:
its slot or network is gone, or the network was reshaped: bind again) and
BOUND_FAILED (the request failed: the reply goes on with the error's kind and
message, "kind\0message" in UTF-8, as an infer error reply would say them; the
request is not run again).
"""
from __future__ import annotations

import os
import struct

import msgpack

from core.microkernel import ProtocolError, RemoteError

from . import contract
from .shm_protocol import tensor_span, unpack_spec

INFER_BIND = "infer_bind"
# the raw verb's tag: 2 since its reply gained the flags (a daemon and a client of different
# builds each find no verb of the other's tag in the carrier's hello, and use `infer` instead)
RAW_INFER = 2

REQUEST = struct.Struct("<Q")  # binding id
REPLY = struct.Struct("<III")  # status, compute time (us), flags[, BOUND_FAILED: the error]
BOUND_OK, BOUND_UNKNOWN, BOUND_FAILED = range(3)
SPARE_CPU = 1  # flag: the request left a CPU free
MAX_MESSAGE = 3072  # bytes of a failure's "kind\0message" (within a raw payload)
# MO_CORE_SPIN_US, read here once for both sides: a client polls for the reply of a request that computes
# in less than this after one that left a CPU spare (client/request_path.py), the CPU daemon's team choice
# counts on it (cpu/plan_pool.py), and the daemon polls this long for a client's next request
SPIN_S = float(os.environ.get("MO_CORE_SPIN_US", "500")) / 1e6


def failure(exc: RemoteError) -> bytes:
    """The BOUND_FAILED reply saying what went wrong (daemon side)."""
    text = f"{exc.kind}\0{exc.message}".encode("utf-8", "replace")[:MAX_MESSAGE]
    return REPLY.pack(BOUND_FAILED, 0, 0) + text


def check_reply(payload: bytes) -> tuple[int, int, int, RemoteError | None]:
    """(status, compute time us, flags, the error of a failed request) of a raw reply
    (client side); ProtocolError when it breaks the contract."""
    if len(payload) < REPLY.size or len(payload) > REPLY.size + MAX_MESSAGE:
        raise ProtocolError(f"a bound request's reply of {len(payload)} bytes")
    status, compute_us, flags = REPLY.unpack_from(payload)
    if status not in (BOUND_OK, BOUND_UNKNOWN, BOUND_FAILED) or (status != BOUND_FAILED and len(payload) != REPLY.size):
        raise ProtocolError(f"a bound request's reply with status {status} and {len(payload)} bytes")
    if flags & ~SPARE_CPU:
        raise ProtocolError(f"a bound request's reply with unknown flags {flags:#x}")
    if status != BOUND_FAILED:
        return status, compute_us, flags, None
    kind, _, message = payload[REPLY.size:].decode("utf-8", "replace").partition("\0")
    return status, 0, 0, RemoteError(kind or "internal", message or "the bound request failed")


def bind_request(handle: int, shm: bytes) -> dict:
    return {"handle": handle, "shm": shm}


def parse_bind(args: dict) -> tuple[int, dict]:
    """(handle, shm spec) of an infer_bind request (daemon side)."""
    if args.get("shm") is None:
        raise RemoteError(contract.SHM, "infer_bind needs 'shm': the shm spec of the requests it binds")
    return contract.handle(args), contract.parse_shm(args["shm"])


def bind_result(binding: int, placed: dict) -> dict:
    return {"binding": binding, "outputs": msgpack.packb(placed)}


def check_bind_result(result: dict, slot_size: int) -> tuple[int, list]:
    """(binding id, [(output name, offset, shape)]) of an infer_bind reply (client
    side); ProtocolError when it breaks the contract or an output lies outside the slot."""
    binding = result.get("binding") if isinstance(result, dict) else None
    if not isinstance(binding, int) or isinstance(binding, bool) or not 0 < binding < 1 << 64:
        raise ProtocolError(f"infer_bind: 'binding' must be a positive 64-bit integer, got {binding!r:.40}")
    placed = unpack_spec(result.get("outputs"), "outputs")
    if not isinstance(placed, dict) or not placed or len(placed) > contract.MAX_INPUTS:
        raise ProtocolError("infer_bind: 'outputs' must be a map {output name: [offset, shape]}")
    outputs = []
    for name, item in placed.items():
        if not isinstance(name, str) or not isinstance(item, list) or len(item) != 2:
            raise ProtocolError(f"infer_bind: output {name!r:.80}: expected [offset, shape]")
        offset, shape, nbytes = tensor_span(item[0], item[1], f"output {name!r:.80}")
        if offset + nbytes > slot_size:
            raise ProtocolError(f"infer_bind: output {name!r:.80} lies outside the slot")
        outputs.append((name, offset, shape))
    return binding, outputs
