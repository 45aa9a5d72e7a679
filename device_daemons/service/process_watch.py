"""Which client processes that own something in a daemon (shared-memory slots, loaded
networks) have ended: a pidfd per owner, readable once the process is gone, so a
reused pid cannot fool it. Not thread-safe: its users call it under their own lock.
A client names its pid itself; one that names another pid only risks its own things.
"""
from __future__ import annotations

import os
import select


class ProcessWatch:
    def __init__(self) -> None:
        self._fds: dict[int, int] = {}  # pid -> its pidfd

    def __bool__(self) -> bool:
        return bool(self._fds)

    def watch(self, pid: int | None) -> bool:
        """Watch `pid` (if not yet); False when it cannot be (None, gone already, no pidfds
        here): what it owns then lives until it is let go of otherwise."""
        if pid is None:
            return False
        if pid in self._fds:
            return True
        try:
            self._fds[pid] = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return False
        return True

    def ended(self) -> set[int]:
        """The watched pids whose process ended (no longer watched after this)."""
        gone = {pid for pid, fd in self._fds.items() if select.select([fd], [], [], 0)[0]}
        for pid in gone:
            os.close(self._fds.pop(pid))
        return gone

    def keep_only(self, pids) -> None:
        """Stop watching the pids not in `pids` (owners with nothing left): one pidfd per
        owner of something, so a client naming pid after pid cannot make the daemon
        hold one for every process of the machine."""
        for pid in [pid for pid in self._fds if pid not in pids]:
            os.close(self._fds.pop(pid))

    def close(self) -> None:
        self.keep_only(())
