"""A thread-safe queue whose arrival can be polled together with ZeroMQ sockets.

ZeroMQ sockets must only be used by the thread that owns them. Other threads hand
work to the owning (I/O) thread through a Mailbox: `put` appends an item and writes
a byte to a pipe; the I/O thread has the pipe's read end in its zmq.Poller (pyzmq
polls plain file descriptors too), wakes up at once, and `drain`s the items.
"""
from __future__ import annotations

import collections
import os
import threading
from typing import Any


class Mailbox:
    def __init__(self) -> None:
        self._items: collections.deque = collections.deque()  # append/popleft are atomic
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self._lock = threading.Lock()  # so put() never writes to a closed (reused) fd
        self._closed = False

    def fileno(self) -> int:
        """The fd to register with zmq.Poller (readable when items may be waiting)."""
        return self._rfd

    def put(self, item: Any) -> bool:
        """Queue `item`; False when the mailbox is closed (item dropped)."""
        with self._lock:
            if self._closed:
                return False
            self._items.append(item)
            try:
                os.write(self._wfd, b"\0")
            except BlockingIOError:
                pass  # the pipe is full, so a wake-up is already pending
            return True

    def drain(self) -> list:
        """All items queued so far (call from the owning thread only)."""
        try:
            while os.read(self._rfd, 4096):
                pass
        except (BlockingIOError, OSError):
            pass
        items = []
        while True:
            try:
                items.append(self._items.popleft())
            except IndexError:
                return items

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for fd in (self._rfd, self._wfd):
            try:
                os.close(fd)
            except OSError:
                pass
