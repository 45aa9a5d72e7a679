"""The daemons' side of the shared memory of bound requests (the protocol, shared
with the client: device_daemons/shm_protocol.py): ShmSlots makes the sealed memfd
slots that local clients ask for (`shm_create`) and finds them again by slot id;
input_views and output_layout make the views of a slot a binding reads its inputs
from and writes its outputs to (the `shm` spec is checked by contract.parse_shm).

The daemon keeps at most `max_slots` slots and `max_bytes` in all (the least
recently used ones are dropped, and their bindings with them: a client then binds
again). Slot ids are random, so one client cannot guess another's. A client names
its pid when it asks for a slot: the daemon holds a pidfd of it, and once that
process is gone (the pidfd reads, so a reused pid cannot fool it) its slots - and
the bindings on them - go at the next create or detach, not at LRU eviction
(issue 21: a killed client pinned 512 MiB). A client that names another pid only
risks its own slots. Every error here is a RemoteError of kind "shm".
"""
from __future__ import annotations

import collections
import fcntl
import mmap
import os
import secrets
import threading

import numpy as np

from core.microkernel import RemoteError

from ..shm_protocol import MEMFD_PREFIX, align
from .process_watch import ProcessWatch

_MAX_SLOTS = 256
_MAX_SLOT_BYTES = 1 << 30
_MAX_TOTAL_BYTES = 8 << 30
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class _Slot:
    __slots__ = ("fd", "mm", "size", "closed", "owner")

    def __init__(self, fd: int, mm: mmap.mmap, size: int, owner: int | None = None):
        self.fd, self.mm, self.size = fd, mm, size
        self.owner = owner  # the client process's pid, when it said
        self.closed = False  # detached or dropped: what still refers to it must let go

    def close(self) -> None:
        # the map itself stays valid while numpy views of it are alive
        self.closed = True
        try:
            os.close(self.fd)
        except OSError:
            pass


class ShmSlots:
    """Shared-memory slots made for clients (see the module doc)."""

    def __init__(self, max_slots: int = _MAX_SLOTS, max_bytes: int = _MAX_TOTAL_BYTES, on_drop=None):
        self._on_drop = on_drop  # called with each slot detached or dropped (after its close)
        self._slots: collections.OrderedDict[int, _Slot] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._max = max_slots
        self._max_bytes = max_bytes
        self._bytes = 0
        self._owners = ProcessWatch()  # the clients that said their pid

    def __len__(self) -> int:
        return len(self._slots)

    def reap(self) -> int:
        """Drops the slots of client processes that ended; how many went."""
        with self._lock:  # (the pidfds are closed under it too: a select on one closed meanwhile would fail)
            if not self._owners:
                return 0
            ended = self._owners.ended()
            if not ended:
                return 0
            gone = [(sid, slot) for sid, slot in self._slots.items() if slot.owner in ended]
            for sid, slot in gone:
                del self._slots[sid]
                self._bytes -= slot.size
        for _, slot in gone:
            slot.close()
            self._dropped(slot)
        return len(gone)

    def _forget_owners(self) -> None:
        """Let go of the pidfds of owners with no slot left (under the lock)."""
        self._owners.keep_only({slot.owner for slot in self._slots.values()})

    def create(self, size, owner: int | None = None) -> dict:
        """A new sealed slot of `size` bytes: {slot, path, name} for the client
        (`owner`: its pid)."""
        self.reap()
        if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= _MAX_SLOT_BYTES:
            raise RemoteError("shm", f"a shared memory slot takes 1 to {_MAX_SLOT_BYTES} bytes, "
                                     f"not {size!r:.40}")
        name = MEMFD_PREFIX + secrets.token_hex(8)
        try:
            fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except (AttributeError, OSError) as exc:
            raise RemoteError("shm", f"cannot make a shared memory slot: {exc}") from None
        try:
            os.ftruncate(fd, size)
            # the size can never change again: a mapping of a shrunk file is SIGBUS
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
            mm = mmap.mmap(fd, size)
        except OSError as exc:
            os.close(fd)
            raise RemoteError("shm", f"cannot make a shared memory slot of {size} bytes: {exc}") from None
        dropped = []
        with self._lock:  # (the owner watched with its slot: _forget_owners never sees one without the other)
            slot = _Slot(fd, mm, size, owner if self._owners.watch(owner) else None)
            sid = secrets.randbits(62) + 1
            self._slots[sid] = slot
            self._bytes += size
            while len(self._slots) > self._max or self._bytes > self._max_bytes:
                _, old = self._slots.popitem(last=False)
                self._bytes -= old.size
                old.close()
                dropped.append(old)
            if dropped:
                self._forget_owners()
        for old in dropped:
            self._dropped(old)
        return {"slot": sid, "path": f"/proc/{os.getpid()}/fd/{fd}", "name": name}

    def _dropped(self, slot: _Slot) -> None:
        if self._on_drop is not None:
            self._on_drop(slot)

    def get(self, sid) -> _Slot:
        with self._lock:
            slot = self._slots.get(sid) if isinstance(sid, int) and not isinstance(sid, bool) else None
            if slot is None:
                raise RemoteError("shm", f"no shared memory slot {sid!r:.24} in this daemon (pid "
                                         f"{os.getpid()}); make a new one")
            self._slots.move_to_end(sid)
            return slot

    def detach(self, sid) -> None:
        self.reap()
        with self._lock:
            slot = self._slots.pop(sid, None) if isinstance(sid, int) else None
            if slot is not None:
                self._bytes -= slot.size
                self._forget_owners()
        if slot is not None:
            slot.close()
            self._dropped(slot)

    def close(self) -> None:
        with self._lock:
            slots, self._slots = list(self._slots.values()), collections.OrderedDict()
            self._bytes = 0
            self._owners.close()
        for slot in slots:
            slot.close()


def input_views(slot: _Slot, specs: dict) -> dict:
    """The inputs of a binding as views of the client's slot (`specs`: the {name:
    (offset, shape, bytes)} of its shm spec, checked by contract.parse_shm)."""
    inputs = {}
    for name, (offset, shape, nbytes) in specs.items():
        if offset + nbytes > slot.size:
            raise RemoteError("shm", f"input {name!r:.80}: {nbytes} bytes at offset {offset} exceed the "
                                     f"slot ({slot.size} bytes)")
        inputs[name] = np.ndarray(shape, np.float32, buffer=slot.mm, offset=offset)
    return inputs


def output_layout(slot: _Slot, out: tuple, shapes: dict) -> tuple[dict, dict] | None:
    """(views, placed spec) of outputs of these shapes ({name: shape}, in the plan's
    output order) placed one after the other, each aligned, in the client's slot from
    `out` = (offset, capacity); None when they do not fit."""
    pos, end = out[0], min(slot.size, out[0] + out[1])
    views, placed = {}, {}
    for name, shape in shapes.items():
        pos = align(pos)
        nbytes = 4 * int(np.prod(shape, dtype=np.int64))
        if pos + nbytes > end:
            return None
        views[name] = np.ndarray(shape, np.float32, buffer=slot.mm, offset=pos)
        placed[name] = [pos, list(shape)]
        pos += nbytes
    return views, placed
