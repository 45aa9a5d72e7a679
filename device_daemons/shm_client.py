"""The client's side of the shared-memory fast path (the protocol: shm_protocol.py).

With a local daemon, inputs and outputs go through a per-request slot in /dev/shm
instead of the socket (the daemon's `shm_attach`, see device_daemons/cpu/shm_slots.py):
only a small header travels over ZeroMQ. Here: making and attaching slots
(take_slot), keeping the free ones per connection for reuse (give_back, at most
_MAX_FREE_SLOTS) or forgetting one the daemon may still write to (discard),
writing a request's inputs into its slot (write_inputs), and handing out the
outputs as views of the slot (lend_outputs). A slot that cannot be made or
attached (no /dev/shm, a daemon in another container) turns shared memory off for
that connection: requests fall back to array frames by themselves.
"""
from __future__ import annotations

import math
import mmap
import os
import secrets
import time
import weakref
from typing import TYPE_CHECKING

import msgpack
import numpy as np

from core.microkernel import MicrokernelError, RemoteError

from .shm_protocol import SHM_DIR, SHM_PREFIX, align
from .transport import HELLO_TIMEOUT

if TYPE_CHECKING:
    from .transport import Connection, Link

_MAX_FREE_SLOTS = 16


class ShmSlot:
    """A shared-memory buffer mapped by this process and by the daemon."""
    __slots__ = ("id", "mm", "size")

    def __init__(self, slot_id: int, mm: mmap.mmap, size: int):
        self.id, self.mm, self.size = slot_id, mm, size


def take_slot(link: Link, conn: Connection, need: int) -> ShmSlot | None:
    """A free shared-memory slot of at least `need` bytes (made and attached when
    there is none); None when shared memory cannot be used with this daemon."""
    if conn.shm_ok is False or not link.core.shared_memory:
        return None
    while conn.shm_returned:
        try:
            give_back(conn, conn.shm_returned.popleft())
        except IndexError:
            break
    with conn.shm_lock:
        for i, slot in enumerate(conn.shm_free):
            if slot.size >= need:
                return conn.shm_free.pop(i)
    size = max(align(need), 1 << 16)
    path = os.path.join(SHM_DIR, f"{SHM_PREFIX}{os.getuid()}-{secrets.token_hex(8)}")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        conn.shm_ok = False
        return None
    try:
        try:
            os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        pending = link.send(conn, "shm_attach", {"path": path, "size": size})
        result, _ = link.wait(conn, pending, "shm_attach",
                              time.monotonic() + min(HELLO_TIMEOUT, link.core.timeout))
    except (OSError, RemoteError):  # e.g. the daemon sees another /dev/shm
        conn.shm_ok = False
        return None
    finally:
        try:
            os.unlink(path)  # both sides have it mapped: the name is not needed
        except OSError:
            pass
    conn.shm_ok = True
    return ShmSlot(int(result["slot"]), mm, size)


def give_back(conn: Connection, slot: ShmSlot) -> None:
    """Return a slot the daemon is done with."""
    with conn.shm_lock:
        if conn.dead is None and len(conn.shm_free) < _MAX_FREE_SLOTS:
            conn.shm_free.append(slot)
            return
    discard(conn, slot)


def discard(conn: Connection, slot: ShmSlot) -> None:
    """Forget a slot (the daemon may still write to it: never reuse it)."""
    if conn.dead is None:
        try:
            conn.client.call_async("shm_detach", {"slot": slot.id})  # fire and forget
        except MicrokernelError:
            pass


def write_inputs(slot: ShmSlot, inputs: dict) -> bytes:
    """Copy the (float32) inputs into the slot; the `shm` argument of infer that
    says where they are and where the outputs may go (the rest of the slot)."""
    spec, pos = {}, 0
    for name, arr in inputs.items():
        np.copyto(np.ndarray(arr.shape, np.float32, buffer=slot.mm, offset=pos), arr)
        spec[name] = [pos, list(arr.shape)]
        pos = align(pos + arr.nbytes)
    return msgpack.packb({"slot": slot.id, "inputs": spec, "out": [pos, slot.size - pos]})


def lend_outputs(slot: ShmSlot, conn: Connection, packed: bytes) -> dict:
    """The outputs the daemon placed in the slot (`outputs_shm` of its reply) as
    views of the slot, which is lent to them: it is reused only once all of them
    are garbage (no copy of the outputs is made). A bad reply raises TypeError or
    ValueError (the slot is not lent then)."""
    try:
        placed = msgpack.unpackb(packed, raw=False, max_ext_len=0)
    except Exception:  # noqa: BLE001 - reported below
        placed = None
    if not isinstance(placed, dict):
        placed = {"?": None}  # fails below: a bad reply
    holder = np.ndarray((slot.size,), np.uint8, buffer=slot.mm)
    outputs = {}
    for name, (off, shape) in placed.items():
        shape = tuple(int(d) for d in shape)
        n = 4 * math.prod(shape)
        if not 0 <= off <= slot.size - n:
            raise ValueError(f"output {name!r} lies outside the slot")
        outputs[name] = holder[off:off + n].view(np.float32).reshape(shape)
    # every output's .base is `holder`: when the last output dies, so does holder
    weakref.finalize(holder, conn.shm_returned.append, slot).atexit = False
    return outputs
