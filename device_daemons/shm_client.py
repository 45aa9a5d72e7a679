"""The client's side of the shared-memory fast path (the protocol: shm_protocol.py).

With a local daemon, inputs and outputs go through a per-request slot of shared
memory instead of the socket (made by the daemon's `shm_create`, see
device_daemons/cpu/shm_slots.py): only a small header travels over ZeroMQ. Here:
asking for slots and mapping them (take_slot), keeping the free ones per connection for reuse (give_back, at most
_MAX_FREE_SLOTS) or forgetting one the daemon may still write to (discard),
writing a request's inputs into its slot (write_inputs), and handing out the
outputs as views of the slot (lend_outputs). A slot that cannot be made or
mapped (no memfd, a daemon in another container) turns shared memory off for
that connection: requests fall back to array frames by themselves.
"""
from __future__ import annotations

import mmap
import os
import time
import weakref
from typing import TYPE_CHECKING

import msgpack
import numpy as np

from core.microkernel import MicrokernelError, ProtocolError, RemoteError

from .shm_protocol import MEMFD_PREFIX, align, memfd_link, tensor_span, unpack_spec
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
    """A free shared-memory slot of at least `need` bytes (made by the daemon and
    mapped here when there is none); None when shared memory cannot be used with
    this daemon."""
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
    try:
        pending = link.send(conn, "shm_create", {"size": size})
        result, _ = link.wait(conn, pending, "shm_create",
                              time.monotonic() + min(HELLO_TIMEOUT, link.core.timeout))
    except RemoteError:  # e.g. a daemon that cannot make memfds
        conn.shm_ok = False
        return None
    sid = result.get("slot")
    mm = _map_slot(result.get("path"), result.get("name"), size)
    if mm is None or not isinstance(sid, int):
        # e.g. a daemon in another container: /proc/<its pid> is not ours to open
        conn.shm_ok = False
        if isinstance(sid, int):
            discard(conn, ShmSlot(sid, None, size))
        return None
    conn.shm_ok = True
    return ShmSlot(sid, mm, size)


def _map_slot(path, name, size: int) -> mmap.mmap | None:
    """Map the daemon's slot `path`, after checking that the file opened is the
    memfd the daemon named (a /proc fd number could have been reused meanwhile)."""
    if not isinstance(path, str) or not isinstance(name, str) or not name.startswith(MEMFD_PREFIX):
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if os.readlink(f"/proc/self/fd/{fd}") != memfd_link(name) or os.fstat(fd).st_size != size:
            return None
        return mmap.mmap(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def give_back(conn: Connection, slot: ShmSlot) -> None:
    """Return a slot the daemon is done with."""
    with conn.shm_lock:
        if conn.dead is None and len(conn.shm_free) < _MAX_FREE_SLOTS:
            conn.shm_free.append(slot)
            return
    discard(conn, slot)


def discard(conn: Connection, slot: ShmSlot) -> None:
    """Forget a slot (the daemon may still write to it: never reuse it)."""
    if conn.dead is None and not conn.client.closed:
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
        placed = unpack_spec(packed, "outputs_shm")
    except ProtocolError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(placed, dict):
        raise ValueError("'outputs_shm' must be a map {output name: [offset, shape]}")
    holder = np.ndarray((slot.size,), np.uint8, buffer=slot.mm)
    outputs = {}
    for name, spec in placed.items():
        if not isinstance(spec, list) or len(spec) != 2:
            raise ValueError(f"output {name!r:.80}: expected [offset, shape]")
        try:
            off, shape, n = tensor_span(spec[0], spec[1], f"output {name!r:.80}")
        except ProtocolError as exc:
            raise ValueError(str(exc)) from None
        if off + n > slot.size:
            raise ValueError(f"output {name!r:.80} lies outside the slot")
        outputs[name] = holder[off:off + n].view(np.float32).reshape(shape)
    # every output's .base is `holder`: when the last output dies, so does holder
    weakref.finalize(holder, conn.shm_returned.append, slot).atexit = False
    return outputs
