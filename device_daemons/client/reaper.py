"""Clean-up that a garbage collection triggers, done later on a thread of its own.

A finalizer (weakref.finalize) runs on whatever thread the collector happens to run on,
in the middle of whatever that thread was doing - possibly while it holds the very lock
the clean-up needs (a connection's shared-memory slot pool: a request taking a slot
allocates, the collector runs, and an unreachable ExecutableNetwork's finalizer wants
to give its slots back: a thread waiting for itself). So a finalizer only queues its
work (`later`: SimpleQueue.put is safe there) and this thread does it. At interpreter
exit the work is done at once (the thread may not get to run again).

    reaper.start()                  # from ordinary code, before any finalizer may need it
    weakref.finalize(obj, reaper.later, fn, arg)
"""
from __future__ import annotations

import atexit
import queue
import threading

_QUEUE: queue.SimpleQueue = queue.SimpleQueue()
_STATE = {"started": False, "exiting": False}
_LOCK = threading.Lock()


def start() -> None:
    """Start the thread (once per process). Call it after making the first
    weakref.finalize, so that this module's exit hook runs before weakref's (atexit
    runs the last registered first) and exit-time finalizers work at once."""
    with _LOCK:
        if _STATE["started"]:
            return
        threading.Thread(target=_run, name="mo-core-reaper", daemon=True).start()
        atexit.register(_STATE.__setitem__, "exiting", True)
        _STATE["started"] = True


def later(fn, *args) -> None:
    """Have fn(*args) called on the reaper's thread (at once when exiting, or when the
    thread was never started)."""
    if _STATE["exiting"] or not _STATE["started"]:
        fn(*args)
        return
    _QUEUE.put((fn, args))


def _run() -> None:
    while True:
        fn, args = _QUEUE.get()
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - clean-up is best effort, as the finalizer's was
            pass
