"""The main socket's work queue: one queue per peer (a client connection), served
round-robin, with limits on what one peer and all peers together may have waiting.

A single FIFO let one client that sends requests without waiting for replies make
every other client wait behind all of them (a hundred heavy requests: 25 s for
another client's load), and grow the daemon's memory with every request it queued
(each message is bounded, their number was not). Here another client's request is
served after at most one request of each peer ahead of it in the turn, and a peer
past its share is refused at once (the caller replies "busy").
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass


TIMED_OUT = object()  # get(timeout): nothing came


@dataclass(frozen=True)
class QueueLimits:
    max_per_peer: int = 256            # requests one peer may have waiting (a client with many in flight)
    max_bytes_per_peer: int = 512 << 20
    max_bytes: int = 2 << 30           # all peers together


class FairQueue:
    def __init__(self, limits: QueueLimits = QueueLimits()) -> None:
        self.limits = limits
        self._cond = threading.Condition()
        self._queues: dict[bytes, deque] = {}
        self._bytes: dict[bytes, int] = {}
        self._turns: deque[bytes] = deque()  # peers with work waiting, in serving order
        self._total = 0
        self._stops = 0

    def put(self, peer: bytes, item, nbytes: int) -> str | None:
        """Queue `item` of `peer` (`nbytes`: its message's size). None when queued, else why
        not (the peer has its share waiting, or all peers together have the most)."""
        with self._cond:
            waiting = self._queues.get(peer)
            count, held = (len(waiting), self._bytes[peer]) if waiting else (0, 0)
            if count >= self.limits.max_per_peer:
                return f"{count} requests of this client are waiting (at most {self.limits.max_per_peer})"
            if count and held + nbytes > self.limits.max_bytes_per_peer:
                return (f"this client's waiting requests hold {held >> 20} MiB (at most "
                        f"{self.limits.max_bytes_per_peer >> 20} MiB)")
            if self._total and self._total + nbytes > self.limits.max_bytes:
                return f"the waiting requests of all clients hold {self._total >> 20} MiB"
            if waiting is None:
                waiting = self._queues[peer] = deque()
                self._turns.append(peer)
            waiting.append((item, nbytes))
            self._bytes[peer] = held + nbytes
            self._total += nbytes
            self._cond.notify()
            return None

    def get(self, timeout: float | None = None):
        """The next item, taking peers in turn (blocks; TIMED_OUT after `timeout` s
        with none); None once stop() asked this thread to end."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._turns and not self._stops:
                if deadline is None:
                    self._cond.wait()
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return TIMED_OUT
                self._cond.wait(left)
            if self._stops:
                self._stops -= 1
                return None
            peer = self._turns.popleft()
            waiting = self._queues[peer]
            item, nbytes = waiting.popleft()
            self._total -= nbytes
            if waiting:
                self._bytes[peer] -= nbytes
                self._turns.append(peer)  # its next request after one of each other peer's
            else:
                del self._queues[peer], self._bytes[peer]
            return item

    def stop(self, threads: int) -> None:
        """Make the next `threads` get() calls return None."""
        with self._cond:
            self._stops += threads
            self._cond.notify_all()

    def waiting(self) -> int:
        with self._cond:
            return sum(len(q) for q in self._queues.values())
