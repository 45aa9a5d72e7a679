"""How the benchmarks time one engine's repeated call: warm-up runs, then the median
and the minimum of `iterations` timed ones (the median is the figure reported; the
minimum shows how much of it is noise of a loaded machine)."""
from __future__ import annotations

import statistics
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
