"""One OpenMP thread per CPU while a request runs on the whole team (team_pinning.c).

Why: on this project's 2-vCPU VM a request that found the machine idle had its threads
placed on one vCPU and moved between them (78 migrations in 40 MobileNetV3Small requests
after 100 ms idle each); such a request took 4-12 ms against 1-2 back to back, OpenVINO's
(whose CPU plugin pins its threads) 3. Pinned for the request, 2.0 ms. libgomp's own
binding (OMP_PROC_BIND) cannot serve a daemon: it pins the process's first thread for
good, and every thread created after it inherits that one CPU.

    pinned = pin_team()   # before the request's first parallel region
    ...                   # the request
    if pinned: unpin()    # the calling thread may run anywhere again

Only for a team as large as the affinity mask (every CPU gets one thread; a smaller team
left unpinned lets the scheduler pick idle CPUs). MO_CORE_PIN_THREADS=0 turns it off."""
from __future__ import annotations

import os

from ...native_build import NativeUnavailable, load_native

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "team_pinning.c")
CDEF = """
int mo_pin_team(const int *cpus, int n);
int mo_unpin(const int *cpus, int n);
"""
ENABLED = os.environ.get("MO_CORE_PIN_THREADS", "1") != "0"
_STATE: list = []  # [(lib, cpus array, n)] once loaded; [None] when pinning is not to be had


def _loaded():
    if not _STATE:
        try:
            ffi, lib = load_native(SOURCE, CDEF)
            cpus = sorted(os.sched_getaffinity(0))
            _STATE.append((lib, ffi.new("int[]", cpus), len(cpus)))
        except (NativeUnavailable, AttributeError, OSError):
            _STATE.append(None)
    return _STATE[0]


def team_size() -> int:
    """How large a team must be to be pinned (the affinity mask's CPUs; 0: never)."""
    state = _loaded() if ENABLED else None
    return state[2] if state is not None and state[2] > 1 else 0


def pin_team() -> bool:
    """Pins the calling thread's team (OpenMP's current team size must be team_size());
    whether it did (unpin() after the request then)."""
    lib, cpus, n = _STATE[0]
    if lib.mo_pin_team(cpus, n) == 0:
        return True
    lib.mo_unpin(cpus, n)  # (some threads may have been pinned: the caller's own at least is free again)
    return False


def unpin() -> None:
    lib, cpus, n = _STATE[0]
    lib.mo_unpin(cpus, n)
