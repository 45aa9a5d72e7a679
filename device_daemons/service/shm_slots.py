"""The CPU daemon's side of the shared-memory fast path (the protocol, shared with
the client: device_daemons/shm_protocol.py): ShmSlots makes the sealed memfd slots
that local clients ask for (`shm_create`) and finds them again by slot id;
input_views reads a request's inputs from its slot without a copy (the `shm`
spec is checked by contract.parse_shm) and place_outputs writes the outputs back.

Slots are per client request slot; the daemon keeps at most `max_slots` of them
and `max_bytes` in all (the least recently used ones are dropped: a client then
gets kind "shm" and falls back to frames). Slot ids are random, so one client
cannot guess another's. Every error here is a RemoteError of kind "shm".
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

_MAX_SLOTS = 256
_MAX_SLOT_BYTES = 1 << 30
_MAX_TOTAL_BYTES = 8 << 30
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class _Slot:
    __slots__ = ("fd", "mm", "size", "views", "closed")

    def __init__(self, fd: int, mm: mmap.mmap, size: int):
        self.fd, self.mm, self.size = fd, mm, size
        # (key, views, placed spec) of the last output_views: a client sends request after
        # request through the same slot, so they are made once, not per request
        self.views = None
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

    def __len__(self) -> int:
        return len(self._slots)

    def create(self, size) -> dict:
        """A new sealed slot of `size` bytes: {slot, path, name} for the client."""
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
        slot = _Slot(fd, mm, size)
        dropped = []
        with self._lock:
            sid = secrets.randbits(62) + 1
            self._slots[sid] = slot
            self._bytes += size
            while len(self._slots) > self._max or self._bytes > self._max_bytes:
                _, old = self._slots.popitem(last=False)
                self._bytes -= old.size
                old.close()
                dropped.append(old)
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
        with self._lock:
            slot = self._slots.pop(sid, None) if isinstance(sid, int) else None
            if slot is not None:
                self._bytes -= slot.size
        if slot is not None:
            slot.close()
            self._dropped(slot)

    def close(self) -> None:
        with self._lock:
            slots, self._slots = list(self._slots.values()), collections.OrderedDict()
            self._bytes = 0
        for slot in slots:
            slot.close()


def input_views(slot: _Slot, specs: dict) -> dict:
    """The inputs of an infer request as views of the client's slot (`specs`: the
    {name: (offset, shape, bytes)} of its shm spec, checked by contract.parse_shm)."""
    inputs = {}
    for name, (offset, shape, nbytes) in specs.items():
        if offset + nbytes > slot.size:
            raise RemoteError("shm", f"input {name!r:.80}: {nbytes} bytes at offset {offset} exceed the "
                                     f"slot ({slot.size} bytes)")
        inputs[name] = np.ndarray(shape, np.float32, buffer=slot.mm, offset=offset)
    return inputs


def _layout(out: tuple, slot_size: int, shapes) -> list | None:
    """Where place_outputs puts outputs of these shapes, in order: [offset], None
    when they do not fit in `out` = (offset, capacity)."""
    pos, end = out[0], min(slot_size, out[0] + out[1])
    offsets = []
    for shape in shapes:
        pos = align(pos)
        nbytes = 4 * int(np.prod(shape, dtype=np.int64))
        if pos + nbytes > end:
            return None
        offsets.append(pos)
        pos += nbytes
    return offsets


def output_layout(slot: _Slot, out: tuple, shapes: dict) -> tuple[dict, dict] | None:
    """(views, placed spec) of outputs of these shapes ({name: shape}, in the plan's
    output order) placed in the client's slot from `out` = (offset, capacity) as
    place_outputs places them; None when they do not fit."""
    offsets = _layout(out, slot.size, shapes.values())
    if offsets is None:
        return None
    views = {name: np.ndarray(shape, np.float32, buffer=slot.mm, offset=off)
             for (name, shape), off in zip(shapes.items(), offsets)}
    return views, {name: [off, list(shape)] for (name, shape), off in zip(shapes.items(), offsets)}


def output_views(slot: _Slot, out: tuple, shapes: dict) -> dict | None:
    """The places in the client's slot where place_outputs will put outputs of these
    shapes ({name: shape}, in the plan's output order), as arrays a plan may write its
    outputs into directly; None when they do not fit."""
    key = (out[0], out[1], tuple(shapes.items()))
    cached = slot.views
    if cached is not None and cached[0] == key:
        return cached[1]
    layout = output_layout(slot, out, shapes)
    if layout is None:
        return None
    slot.views = (key, *layout)
    return layout[0]


def place_outputs(slot: _Slot, out: tuple, outputs: dict) -> dict | None:
    """Write the outputs into the client's slot, from `out` = (offset, capacity)
    (nothing is copied when every output is its output_views array: the plan wrote
    them there); the placed spec {name: [offset, shape]}, None when they do not fit."""
    cached = slot.views
    if (cached is not None and cached[0][:2] == (out[0], out[1]) and len(outputs) == len(cached[1])
            and all(outputs.get(name) is view for name, view in cached[1].items())):
        return cached[2]  # every output was written into its output_views array
    offsets = _layout(out, slot.size, [arr.shape for arr in outputs.values()])
    if offsets is None:
        return None
    placed = {}
    for (name, arr), pos in zip(outputs.items(), offsets):
        np.copyto(np.ndarray(arr.shape, np.float32, buffer=slot.mm, offset=pos), arr, casting="unsafe")
        placed[name] = [pos, list(arr.shape)]
    return placed
