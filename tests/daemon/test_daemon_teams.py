"""Two clients of one CPU daemon, each on a connection thread of its own: the one that went idle frees its
OpenMP team once the other runs requests on one (device_daemons/cpu/teams.py; libgomp's omp_pause_resource_all),
so the process keeps one team, not two - read from the daemon's threads in /proc - and the freed client's next
requests make it again and are still right."""
from __future__ import annotations

import os
import threading
import time

import pytest

from tests.daemon.conftest import F32, assert_close
from tests.support import wait_until


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


@pytest.mark.timeout(120)
def test_an_idle_client_frees_its_team_while_another_runs_on_one(fresh_runtime, tiny):
    from device_daemons.client import IECore

    def client(name, ready, go, results):
        """Loads the tiny net, then runs 4 requests each time `go` is set (on this thread's own connection)."""
        try:
            with IECore(policy="auto") as ie:
                net = ie.load_network(ie.read_network(tiny.xml), "CPU", config=F32)
                results[name] = (ie.daemon_pid(), net.get_config("INFERENCE_NUM_THREADS"))
                ready.set()
                while go.wait(30) and not results.get("stop"):
                    go.clear()
                    for i in range(4):
                        x = tiny.input(i)
                        assert_close(net.infer({"data": x})["prob"], tiny.reference(x))
                    results[name + " ran"] = results.get(name + " ran", 0) + 1
                    ready.set()
        except BaseException as exc:  # (the test says it, not a thread's traceback)
            results[name + " failed"] = repr(exc)
            ready.set()
    results: dict = {}
    events = {n: (threading.Event(), threading.Event()) for n in "ab"}
    threads = [threading.Thread(target=client, args=(n, *events[n], results)) for n in "ab"]
    for t in threads:
        t.start()
    try:
        for n in "ab":
            assert events[n][0].wait(60), results
        (pid, team), (pid_b, _) = results["a"], results["b"]
        assert pid == pid_b

        def run(n):
            ready, go = events[n]
            ready.clear()
            go.set()
            assert ready.wait(60) and n + " failed" not in results, results
        run("a")  # a's connection thread ran on the whole team: it keeps it (a thread per CPU but its own)
        time.sleep(0.3)  # alone: it keeps it
        alone = _threads(pid)
        run("b")  # b's thread makes a team of its own; a, idle, frees its own soon after
        # b's connection thread and its team's (team - 1) threads came, a's (team - 1) went: one more than before
        assert wait_until(lambda: _threads(pid) == alone + 1, timeout=5), (alone, _threads(pid), team)
        time.sleep(0.3)
        assert _threads(pid) == alone + 1  # b keeps its team: it is alone now
        run("a")  # a makes its team again, and its answers are right (client); b, idle, frees its own
        assert wait_until(lambda: _threads(pid) == alone + 1, timeout=5), (alone, _threads(pid), team)
        assert results["a ran"] == 2 and results["b ran"] == 1
    finally:
        results["stop"] = True
        for n in "ab":
            events[n][1].set()
        for t in threads:
            t.join(30)
