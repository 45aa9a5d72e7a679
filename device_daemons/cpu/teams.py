"""Which of the CPU daemon's request threads keep an OpenMP team, and freeing an idle one.

libgomp gives every thread that ever opened a parallel region a team of its own (a pool
of threads, kept between regions), and once a process has more team threads than CPUs
it spins only ~1000 times at a barrier before sleeping (libgomp's "throttled" spin,
not settable): a daemon with two clients, each on a connection thread of its own that
ran a request on the whole team, runs every request with threads that sleep and are
woken at each of its barriers (in-process, a second team kept alive beside the one
running: MobileNetV3Small bf16 0.66 -> 0.69 ms, MobileNetV2 2.0 -> 2.5-4.0). So a
request thread - a carrier connection's, or a pool thread that served the fallback
`infer` - that has waited IDLE_S for its next request while another thread keeps a
team frees its own (Server.on_idle; onednn/library.py: release_team); its next request
makes the team again (a thread start, tens of microseconds). While no other thread keeps
one, it looks again after twice as long each time, up to MAX_WAIT_S: a thread that
runs requests alone keeps its team, and one that went idle first frees it soon after
another thread starts running requests on a team.
"""
from __future__ import annotations

import threading

IDLE_S = 0.005  # a request thread idle this long frees its team where another thread keeps one
MAX_WAIT_S = 0.2  # the longest between two looks of an idle thread that keeps a team

_lock = threading.Lock()
_holders: set[threading.Thread] = set()  # the threads that keep a team (objects: an ident is reused)
_local = threading.local()  # a thread's wait until its next look (idle)


def ran(threads: int) -> None:
    """The calling thread just ran a request on `threads` OpenMP threads."""
    _local.wait = IDLE_S
    if threads > 1:
        me = threading.current_thread()
        if me not in _holders:
            with _lock:
                _holders.add(me)


def release_if_shared(release) -> bool:
    """Where the calling thread keeps a team and another live thread keeps one too,
    `release()` frees its own (False from it: it could not). True when it did."""
    me = threading.current_thread()
    with _lock:
        if me not in _holders:
            return False
        _holders.difference_update([t for t in _holders if not t.is_alive()])  # (they took their teams along)
        if len(_holders) <= 1:
            return False
    if not release():
        return False
    with _lock:
        _holders.discard(me)
    return True


def idle(release) -> float | None:
    """A request thread's idle hook (Server.on_idle): frees its team where another
    thread keeps one (release_if_shared); else how long until it looks again (None:
    it keeps no team, nothing to look for)."""
    if threading.current_thread() not in _holders or release_if_shared(release):
        return None
    wait = _local.wait = min(MAX_WAIT_S, 2 * getattr(_local, "wait", IDLE_S))
    return wait
