"""How the benchmarks time one engine's repeated call: warm-up runs, then the median
and the minimum of `iterations` timed ones (the median is the figure reported; the
minimum shows how much of it is noise of a loaded machine).

Interleaved timing (`serve_turns` in each engine's process, `Turns` in the
benchmark's): the engines stay loaded side by side and take turns of a few requests
each, so that every engine sees the same phases of the machine. On the small VMs
these benchmarks run on, the speed of the same loop changes by ~10 % for a second or
so at a time (ResNet50 in-process: 33.3 ms for 25 requests, then 36.3 ms for 25, for
OpenVINO alike); engines timed one after the other - rounds of 30 requests - fall into
different phases, and their ratio moves by as much, while turns of ~0.2 s put both in
the same one."""
from __future__ import annotations

import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time


def measure(fn, iterations: int, warmup: int = 5, clock=time.perf_counter, idle: float = 0.0) -> tuple[float, float]:
    """(median, min) seconds of `fn()` over `iterations` calls after `warmup` untimed ones,
    by `clock` (wall time; time.process_time for the CPU time of every thread); `idle` s
    slept before each timed call, untimed (a request that finds the machine idle)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        if idle:
            time.sleep(idle)
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times), min(times)


def measure_ms(fn, iterations: int, warmup: int = 5) -> tuple[float, float]:
    """measure() in milliseconds, rounded to the microsecond (for tables and JSON rows)."""
    median, best = measure(fn, iterations, warmup)
    return round(median * 1e3, 3), round(best * 1e3, 3)


def serve_turns(fn, warmup: int, clock=time.perf_counter, idle: float = 0.0, lines=None, out=None) -> dict:
    """The engine's side of interleaved timing: `warmup` untimed calls, then a
    {"ready": true} line on `out`; then for each line "N" read from `lines`: one untimed
    call (the engine before it may still hold the cores - its threads spin at a
    barrier for a while after a request - and its data fills the caches) and N timed
    ones, then {"turn": N} when they are done; "stop" (or the end of `lines`) ends it:
    {"main": (median, min) of every timed call, "turns": each turn's median}."""
    lines, out = lines or sys.stdin, out or sys.stdout
    for _ in range(warmup):
        fn()
    print(json.dumps({"ready": True}), file=out, flush=True)
    times, turns = [], []
    for line in lines:
        if line.strip() == "stop":
            break
        fn()
        turn = []
        for _ in range(int(line)):
            if idle:
                time.sleep(idle)
            start = clock()
            fn()
            turn.append(clock() - start)
        times += turn
        turns.append(statistics.median(turn))
        print(json.dumps({"turn": len(turn)}), file=out, flush=True)
    if not times:
        raise SystemExit("serve_turns: stopped before any turn")
    return {"main": (statistics.median(times), min(times)), "turns": turns}


def paired(ours, theirs) -> str:
    """Two engines' turns of the same cycles (serve_turns' "turns"): the median and the
    middle half of the ratios of ours to theirs, cycle by cycle."""
    ratios = sorted(a / b for a, b in zip(ours, theirs))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return "{:.3f}x ({:.3f}-{:.3f})".format(statistics.median(ratios), q[0], q[2])


def interleaved(commands: dict, env: dict, cwd: str, cycles: int, n: int, envs: dict | None = None) -> dict[str, dict]:
    """{name: its final JSON object} of the engines {name: command} (each calling
    serve_turns), loaded in that order and given `cycles` cycles of turns of n timed
    requests, the order reversed every other cycle (no engine always first). `envs`
    {name: environment}: an engine's own instead of `env`."""
    names = list(commands)
    turns = Turns()
    try:
        for name in names:
            turns.start(name, commands[name], (envs or {}).get(name, env), cwd)
        for r in range(cycles):
            turns.cycle(names[::-1] if r % 2 else names, n)
        return turns.stop()
    finally:
        turns.close()


class Turns:
    """The benchmark's side of interleaved timing: engine processes (each in a session
    of its own, as a daemon has) started one at a time - none loads while another
    is timed -, then `cycle(order, n)` gives each a turn of n timed requests, one
    engine at a time; `stop()` collects each one's final JSON line. Every wait on an
    engine gives up after `timeout` s."""

    def __init__(self, timeout: float = 900.0):
        self.timeout = timeout
        self.procs: dict[str, subprocess.Popen] = {}
        self._pending: dict[str, bytes] = {}  # what an engine wrote past its last line read
        self._errors: dict = {}  # each engine's standard error (a temporary file)

    def start(self, name: str, cmd: list, env: dict, cwd: str) -> None:
        self._errors[name] = tempfile.TemporaryFile()  # (a pipe nobody reads would block a chatty engine)
        self.procs[name] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=self._errors[name], text=True, env=env, cwd=cwd,
                                            start_new_session=True)
        self._pending[name] = b""
        self._line(name, "ready")

    def cycle(self, order, n: int) -> None:
        for name in order:
            proc = self.procs[name]
            proc.stdin.write(f"{n}\n")
            proc.stdin.flush()
            self._line(name, "turn")

    def stop(self) -> dict[str, dict]:
        results = {}
        for name, proc in self.procs.items():
            proc.stdin.write("stop\n")
            proc.stdin.close()
            results[name] = self._line(name, None)
            if proc.wait(self.timeout):
                self._failed(name, f"failed (exit status {proc.returncode})")
        self.procs = {}
        return results

    def _failed(self, name: str, what: str):
        err = self._errors[name]
        err.seek(0)
        raise SystemExit(f"engine {name} {what}:\n" + err.read()[-3000:].decode("utf-8", "replace"))

    def close(self) -> None:
        """Ends the engines still running (after a failure)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.procs = {}
        for err in self._errors.values():
            err.close()
        self._errors = {}

    def _line(self, name: str, key: str | None) -> dict:
        """The engine's next JSON object (one holding `key`; None: its final result, the
        first with neither "ready" nor "turn"), skipping what else it prints."""
        proc = self.procs[name]
        fd = proc.stdout.fileno()  # (read unbuffered: a buffered reader's lines would hide from select)
        end = time.monotonic() + self.timeout
        while True:
            line, newline, rest = self._pending[name].partition(b"\n")
            if not newline:
                left = end - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    self._failed(name, f"gave no answer within {self.timeout:g} s")
                data = os.read(fd, 1 << 16)
                if not data:
                    self._failed(name, f"ended early (exit status {proc.wait()})")
                self._pending[name] += data
                continue
            self._pending[name] = rest
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and (key in doc if key else not {"ready", "turn"} & set(doc)):
                return doc
