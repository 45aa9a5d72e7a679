"""What a framework worker (TensorFlow, Caffe) died or hung running is refused for a
while: its next runs fail at once with the reason, instead of spending the worker's
restart budget that every client's framework-backed layers share. Keyed by what ran
(a sub-graph's id, a Caffe layer's definition). Callers hold their own lock.
"""
from __future__ import annotations

import os
import time

from core.microkernel import MicrokernelTimeout, RemoteError, WorkerError


def env_number(name: str, default: float, low: float) -> float:
    """A number from the environment (`default` when unset or unreadable), at least `low`."""
    try:
        return max(low, float(os.environ.get(name, default)))
    except ValueError:
        return default


class Quarantine:
    def __init__(self, what: str, worker: str, env: str):
        self.what, self.worker, self.env = what, worker, env  # "this sub-graph", "TF worker", its seconds' variable
        self._until: dict[str, tuple[float, str]] = {}  # key -> (until, why)

    def check(self, key: str) -> None:
        """RemoteError "quarantined" while `key` is."""
        entry = self._until.get(key)
        if entry is None:
            return
        until, why = entry
        left = until - time.monotonic()
        if left <= 0:
            del self._until[key]
            return
        raise RemoteError("quarantined", f"{self.what} is quarantined for {left:.0f} s more: {why}. Until then the "
                                         f"daemon refuses to run it ({self.env})")

    def failed(self, key: str, exc: Exception) -> None:
        """The worker died or hung running `key`: quarantined (not when the worker could not
        even be restarted: that is not this one's doing)."""
        seconds = env_number(self.env, 300, 0)
        if seconds <= 0 or (isinstance(exc, WorkerError) and "restart budget" in str(exc)):
            return
        what = "did not answer in time" if isinstance(exc, MicrokernelTimeout) else "died"
        why = f"the {self.worker} {what} running it ({str(exc).splitlines()[0][:300]})"
        self._until[key] = (time.monotonic() + seconds, why)

    def clear(self) -> None:
        self._until.clear()
