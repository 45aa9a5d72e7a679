"""The client's shared-memory slots (the protocol: shm_protocol.py; the daemon's
side: service/shm_slots.py), where bound requests (bound_client.py) keep their
inputs and outputs.

A SlotPool belongs to one connection to one daemon: it asks the daemon for slots
(`shm_create`) and maps them (take), keeps the free ones for reuse (give_back, at
most _MAX_FREE_SLOTS) or forgets one the daemon may still write to (discard). A
slot that cannot be made or mapped (no memfd, a daemon in another container) turns
shared memory off for that connection: its requests take the fallback
(request_path.py). The pool talks to the daemon only through the two callables it
is given, so it knows nothing of connections and links.
"""
from __future__ import annotations

import mmap
import os
import threading
from typing import Callable

from core.microkernel import MicrokernelError, RemoteError

from .. import contract
from ..shm_protocol import MEMFD_PREFIX, align, memfd_link

_MAX_FREE_SLOTS = 16


class ShmSlot:
    """A shared-memory buffer mapped by this process and by the daemon."""
    __slots__ = ("id", "mm", "size")

    def __init__(self, slot_id: int, mm: mmap.mmap | None, size: int):
        self.id, self.mm, self.size = slot_id, mm, size


class SlotPool:
    """The shared-memory slots of one connection (see the module doc).

    `call(op, args) -> result` asks the daemon and waits; `post(op, args)` sends
    without waiting (used for shm_detach). `ok`: None until the first slot is made,
    then True / False (False: frames only)."""

    def __init__(self, enabled: bool, call: Callable[[str, dict], dict],
                 post: Callable[[str, dict], None]):
        self.ok: bool | None = None if enabled else False
        self._call = call
        self._post = post
        self._free: list[ShmSlot] = []
        self._lock = threading.Lock()
        self._closed = False

    def take(self, need: int) -> ShmSlot | None:
        """A free slot of at least `need` bytes (made by the daemon and mapped here
        when there is none); None when shared memory cannot be used."""
        if self.ok is False:
            return None
        with self._lock:
            for i, slot in enumerate(self._free):
                if slot.size >= need:
                    return self._free.pop(i)
        size = max(align(need), 1 << 16)
        try:
            result = self._call(contract.SHM_CREATE, {"size": size, "pid": os.getpid()})  # (freed when we end)
        except RemoteError:  # e.g. a daemon that cannot make memfds
            self.ok = False
            return None
        sid = result.get("slot")
        mm = _map_slot(result.get("path"), result.get("name"), size)
        if mm is None or not isinstance(sid, int):
            # e.g. a daemon in another container: /proc/<its pid> is not ours to open
            self.ok = False
            if isinstance(sid, int):
                self.discard(ShmSlot(sid, None, size))
            return None
        self.ok = True
        return ShmSlot(sid, mm, size)

    def give_back(self, slot: ShmSlot) -> None:
        """Return a slot the daemon is done with."""
        with self._lock:
            if not self._closed and len(self._free) < _MAX_FREE_SLOTS:
                self._free.append(slot)
                return
        self.discard(slot)

    def discard(self, slot: ShmSlot) -> None:
        """Forget a slot (the daemon may still write to it: never reuse it)."""
        if not self._closed:
            try:
                self._post(contract.SHM_DETACH, {"slot": slot.id})  # fire and forget
            except MicrokernelError:
                pass

    def close(self) -> None:
        """The connection is gone: nothing more to reuse or detach."""
        with self._lock:
            self._closed = True
            self._free.clear()


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
