"""The CPU daemon's side of the shared-memory fast path (the protocol, shared with
the client: device_daemons/shm_protocol.py): ShmSlots maps the /dev/shm files that
local clients `shm_attach` and finds them again by slot id; unpack_shm checks the
`shm` argument of infer, input_views reads a request's inputs from its slot
without a copy and place_outputs writes the outputs back to it.

Slots are per client request slot; the daemon keeps at most `_MAX_SLOTS`
(least recently used ones are dropped: a client then gets kind "shm" and falls
back to frames). Every error here is a RemoteError of kind "shm".
"""
from __future__ import annotations

import collections
import itertools
import math
import os
import threading

import msgpack
import numpy as np

from core.microkernel import RemoteError

from ..shm_protocol import SHM_DIR, SHM_PREFIX, align

_MAX_SLOTS = 256
_MAX_SLOT_BYTES = 4 << 30


class ShmSlots:
    """Shared-memory slots mapped for clients (see the module doc)."""

    def __init__(self, max_slots: int = _MAX_SLOTS):
        self._slots: collections.OrderedDict[int, tuple] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._max = max_slots

    def __len__(self) -> int:
        return len(self._slots)

    def attach(self, path, size) -> int:
        import mmap
        import stat
        if not isinstance(path, str) or os.path.dirname(path) != SHM_DIR \
                or not os.path.basename(path).startswith(SHM_PREFIX):
            raise RemoteError("shm", f"shared memory files must be {SHM_DIR}/{SHM_PREFIX}*, got {path!r:.100}")
        if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= _MAX_SLOT_BYTES:
            raise RemoteError("shm", f"bad shared memory size {size!r:.40}")
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise RemoteError("shm", f"cannot open {path}: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
                raise RemoteError("shm", f"{path} is not a private regular file of ours")
            if st.st_size != size:
                raise RemoteError("shm", f"{path} has {st.st_size} bytes, not {size}")
            mm = mmap.mmap(fd, size)
        except OSError as exc:
            raise RemoteError("shm", f"cannot map {path}: {exc}") from None
        finally:
            os.close(fd)
        with self._lock:
            sid = next(self._ids)
            self._slots[sid] = (mm, size)
            while len(self._slots) > self._max:
                self._slots.popitem(last=False)  # views still in use keep their map alive
        return sid

    def get(self, sid) -> tuple:
        with self._lock:
            entry = self._slots.get(sid) if isinstance(sid, int) else None
            if entry is None:
                raise RemoteError("shm", f"no shared memory slot {sid!r:.20} in this daemon (pid {os.getpid()}); "
                                         f"attach it again")
            self._slots.move_to_end(sid)
            return entry

    def detach(self, sid) -> None:
        with self._lock:
            self._slots.pop(sid, None)


def unpack_shm(packed) -> dict:
    """The `shm` argument of infer: msgpack bytes of {slot, inputs: {name: [offset,
    shape]}, out: [offset, capacity]} (packed, because the protocol's checks walk
    every element of a nested structure in Python, ~30 us for a few shapes)."""
    if not isinstance(packed, bytes) or len(packed) > 65536:
        raise RemoteError("shm", "'shm' must be msgpack bytes of at most 64 KiB")
    try:
        shm = msgpack.unpackb(packed, raw=False, strict_map_key=True, max_ext_len=0)
    except Exception as exc:  # msgpack raises several types
        raise RemoteError("shm", f"'shm' is not valid msgpack: {exc}") from None
    if not isinstance(shm, dict) or not isinstance(shm.get("inputs"), dict) \
            or not all(isinstance(k, str) for k in shm["inputs"]):
        raise RemoteError("shm", "'shm' must be {slot, inputs: {name: [offset, shape]}, out: [offset, capacity]}")
    return shm


def _shm_view(mm, size: int, offset, shape, where: str) -> np.ndarray:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 or offset % 4:
        raise RemoteError("shm", f"{where}: bad offset {offset!r:.40}")
    shape = tuple(shape) if isinstance(shape, (list, tuple)) else None
    if shape is None or len(shape) > 8 or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise RemoteError("shm", f"{where}: bad shape")
    nbytes = 4 * math.prod(shape)
    if offset + nbytes > size:
        raise RemoteError("shm", f"{where}: {nbytes} bytes at offset {offset} exceed the slot ({size} bytes)")
    return np.ndarray(shape, np.float32, buffer=mm, offset=offset)


def input_views(slot: tuple, specs: dict) -> dict:
    """The inputs of an infer request as views of the client's slot (`specs`: the
    {name: [offset, shape]} of its unpacked `shm` argument)."""
    mm, size = slot
    inputs = {}
    for name, spec in specs.items():
        if not isinstance(spec, list) or len(spec) != 2:
            raise RemoteError("shm", f"input {name!r}: expected [offset, shape]")
        inputs[name] = _shm_view(mm, size, spec[0], spec[1], f"input {name!r}")
    return inputs


def place_outputs(slot: tuple, out, outputs: dict) -> dict | None:
    """Write the outputs into the client's slot; None when they do not fit."""
    mm, size = slot
    if not isinstance(out, list) or len(out) != 2 or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in out):
        raise RemoteError("shm", "'out' must be [offset, capacity]")
    pos, end = out[0], min(size, out[0] + out[1])
    placed = {}
    for name, arr in outputs.items():
        pos = align(pos)
        if pos + arr.nbytes > end:
            return None
        np.copyto(np.ndarray(arr.shape, np.float32, buffer=mm, offset=pos), arr, casting="unsafe")
        placed[name] = [pos, list(arr.shape)]
        pos += arr.nbytes
    return placed
