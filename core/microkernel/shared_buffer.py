"""A shared-memory buffer between a process and the worker it launched, for
tensors that are too big for the socket to be cheap (a 1x56x56x64 float32 tensor
costs ~0.5 ms of ZeroMQ copies each way; through a shared buffer, one memcpy).

The CALLER makes it: an anonymous memory file (memfd) of a fixed size, sealed so
that its size never changes (a mapping of a file shrunk under it is SIGBUS),
mapped, and named by a random token. It hands the worker the descriptor itself
(SCM_RIGHTS over the worker's Unix socket, a raw verb: direct.py): a sandboxed
worker sees no other process's /proc, and a descriptor is all it gets of its
parent. The worker maps it once (adopt), after checking that the file it got is a
sealed memfd of that name and size; requests then name it by {name, size}.
Tensors are placed at ALIGN-byte offsets (place).
"""
from __future__ import annotations

import fcntl
import mmap
import os
import secrets

import numpy as np

ALIGN = 64
PREFIX = "mo-core-buffer-"
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


def align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def available() -> bool:
    return hasattr(os, "memfd_create")


class SharedBuffer:
    """The caller's side: `spec` goes into requests, `view(offset, shape)` reads and
    writes it."""

    def __init__(self, size: int):
        self.size = int(size)
        self.name = PREFIX + secrets.token_hex(8)
        self.fd = os.memfd_create(self.name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, self.size)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, _SEALS)
            self.mm = mmap.mmap(self.fd, self.size)
        except OSError:
            os.close(self.fd)
            raise
        self.spec = {"name": self.name, "size": self.size}

    def view(self, offset: int, shape, dtype=np.float32) -> np.ndarray:
        return np.ndarray(tuple(shape), dtype, buffer=self.mm, offset=offset)

    def close(self):
        try:
            os.close(self.fd)  # (the map stays valid while views of it live)
        except OSError:
            pass


def place(shapes, start: int = 0, itemsize: int = 4) -> tuple[list[int], int]:
    """(offsets, end) of tensors of `shapes` laid out from `start`."""
    offsets, pos = [], align(start)
    for shape in shapes:
        offsets.append(pos)
        pos = align(pos + itemsize * int(np.prod(shape, dtype=np.int64)))
    return offsets, pos


def adopt(fd: int, name: str, size: int) -> mmap.mmap:
    """The worker's side: the buffer whose descriptor `fd` the caller passed, mapped
    (the descriptor is closed). ValueError when it is not a sealed memfd named
    `name` of `size` bytes."""
    try:
        if not isinstance(name, str) or not name.startswith(PREFIX) or isinstance(size, bool) or \
                not isinstance(size, int) or size <= 0:
            raise ValueError("the shared buffer's name and size are malformed")
        if os.readlink("/proc/self/fd/{}".format(fd)) != "/memfd:{} (deleted)".format(name) or \
                os.fstat(fd).st_size != size:
            raise ValueError("the descriptor passed is not the shared buffer {} of {} bytes".format(name, size))
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        if seals & _SEALS != _SEALS:
            raise ValueError("the shared buffer {} is not sealed against resizing".format(name))
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)
