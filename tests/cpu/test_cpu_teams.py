"""The CPU daemon's bookkeeping of the OpenMP teams its request threads keep (device_daemons/cpu/teams.py),
on real threads with a stand-in release (tests/daemon/test_daemon_teams.py frees real libgomp teams)."""
from __future__ import annotations

import threading

from device_daemons.cpu import teams


def _on_thread(fn):
    """fn's result, run on a thread of its own that then ends."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


class _Holder:
    """A thread that ran a request on a team and stays alive (idle) until `stop()`; `call(fn)` runs fn there."""

    def __init__(self, threads: int = 2):
        self.jobs, self.results = [], []
        self.go, self.done = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, args=(threads,))
        self.thread.start()
        self.done.wait(5)

    def _run(self, threads):
        teams.ran(threads)
        self.done.set()
        while True:
            self.go.wait(5)
            self.go.clear()
            if not self.jobs:
                return
            self.results.append(self.jobs.pop()())
            self.done.set()

    def call(self, fn):
        self.done.clear()
        self.jobs.append(fn)
        self.go.set()
        self.done.wait(5)
        return self.results[-1]

    def stop(self):
        self.go.set()
        self.thread.join(5)


def test_an_idle_thread_frees_its_team_only_while_another_keeps_one():
    released = []

    def release(ok=True):
        released.append(threading.current_thread())
        return ok
    teams._holders.clear()
    a = _Holder()
    try:
        # alone: it keeps its team and looks again after twice as long each time, up to MAX_WAIT_S
        waits = [a.call(lambda: teams.idle(release)) for _ in range(8)]
        assert waits[0] == 2 * teams.IDLE_S and waits == sorted(waits) and waits[-1] == teams.MAX_WAIT_S
        assert released == []
        b = _Holder()
        try:
            assert a.call(lambda: teams.idle(release)) is None  # another keeps one: freed, nothing more to look for
            assert released == [a.thread] and teams._holders == {b.thread}
            assert b.call(lambda: teams.idle(release)) == 2 * teams.IDLE_S  # b is alone again: it keeps its own
            assert a.call(lambda: teams.idle(release)) is None and len(released) == 1  # a keeps none
            a.call(lambda: teams.ran(2))  # a's next request made its team again
            assert a.call(lambda: teams.idle(lambda: release(False))) == 2 * teams.IDLE_S  # it could not free it
            assert teams._holders == {a.thread, b.thread}
        finally:
            b.stop()
        # a thread that ended took its team with it: a is alone again
        assert a.call(lambda: teams.idle(release)) is not None and len(released) == 2
    finally:
        a.stop()
    assert _on_thread(lambda: (teams.ran(1), teams.idle(release))[1]) is None  # one thread: no team kept
    teams._holders.clear()
