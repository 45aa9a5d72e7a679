"""benchmarks/timing.py's interleaved timing: real engine processes (a few lines of
Python that sleep, standing in for an inference engine) taking turns."""
import os
import sys

import pytest

from benchmarks import timing
from tests.support import REPO

# an engine: each call appends its name to a shared log, then sleeps its own time
ENGINE = """
import sys, time
sys.path.insert(0, {repo!r})
from benchmarks.timing import serve_turns
name, seconds, log = sys.argv[1], float(sys.argv[2]), sys.argv[3]
print("engine " + name + " loading")  # (not a JSON line: skipped)
def call():
    with open(log, "a") as f:
        f.write(name)
    time.sleep(seconds)
import json
print(json.dumps(dict(serve_turns(call, warmup=2), name=name)), flush=True)
"""


def _engine(name, seconds, log):
    return [sys.executable, "-c", ENGINE.format(repo=REPO), name, str(seconds), str(log)]


def test_engines_take_turns_one_at_a_time_and_report_every_timed_call(tmp_path):
    log = tmp_path / "calls"
    results = timing.interleaved({"a": _engine("a", 0.002, log), "b": _engine("b", 0.006, log)}, dict(os.environ),
                                 REPO, cycles=3, n=4)
    # loaded one after the other (2 warm-up calls each), then turns of 1 untimed + 4 timed calls, one engine at a time
    assert log.read_text() == "aa" "bb" + "aaaaa" "bbbbb" + "bbbbb" "aaaaa" + "aaaaa" "bbbbb"
    assert set(results) == {"a", "b"}
    for name, seconds in (("a", 0.002), ("b", 0.006)):
        r = results[name]
        assert r["name"] == name
        assert len(r["turns"]) == 3
        median, best = r["main"]
        assert seconds <= best <= median < seconds + 0.05
        assert all(seconds <= t < seconds + 0.05 for t in r["turns"])


def test_an_engine_that_fails_is_named_with_its_error():
    turns = timing.Turns(timeout=60)
    broken = [sys.executable, "-c", "import sys; sys.stderr.write('no such model here'); sys.exit(3)"]
    try:
        with pytest.raises(SystemExit, match=r"(?s)engine broken ended early \(exit status 3\).*no such model here"):
            turns.start("broken", broken, dict(os.environ), REPO)
    finally:
        turns.close()


def test_an_engine_that_hangs_is_given_up_after_the_timeout():
    turns = timing.Turns(timeout=1)
    try:
        with pytest.raises(SystemExit, match="engine slow gave no answer within 1 s"):
            turns.start("slow", [sys.executable, "-c", "import time; time.sleep(30)"], dict(os.environ), REPO)
    finally:
        turns.close()
    assert turns.procs == {}


def test_paired_ratios_are_taken_cycle_by_cycle():
    # ours twice as slow in every cycle, however fast the machine was in it
    assert timing.paired([2.0, 20.0, 4.0, 8.0], [1.0, 10.0, 2.0, 4.0]) == "2.000x (2.000-2.000)"
    assert timing.paired([1.0], [2.0]) == "0.500x (0.500-0.500)"
