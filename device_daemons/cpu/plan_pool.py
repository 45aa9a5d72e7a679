"""The compiled instances of one network in the CPU daemon (PlanPool).

An ExecutionPlan is not thread-safe (its kernels keep workspaces, e.g. the
convolution's column buffer), so each compiled network owns a small pool of plan
instances: a request borrows an idle instance or, when all are busy and fewer
than `threads` exist, compiles one more; numpy and BLAS release the GIL, so two
requests really run in parallel on two cores. The daemon (service/device_daemon.py)
caches the pools and hands out one Handle per load_network.

How many OpenMP threads a request that runs alone gets - the network's whole team or
one - is measured, not guessed (TeamChoice): a network of many small primitives (an
unrolled LSTM: 700 primitives on [1, 128] tensors) or of small images (the OD API's
SSD export) loses more to waking the team and to its barriers than the second thread
gains it, a large one the other way round, and where the line lies depends on the CPU,
on its load and on whether the client polls for the reply on a core meanwhile.
"""
from __future__ import annotations

import threading
import time

from ..bound_protocol import SPIN_S

EXPLORE_RUNS = 5  # timed requests with each team size when choosing (after one untimed each: a program's first)
EXPLORE_EVERY = 2000  # requests between two choices (the machine's load changes) ...
EXPLORE_EVERY_S = 5.0  # ... or seconds, whichever ends first: on a shared VM the faster size changed by the minute
EXPLORE_BELOW_US = 10_000  # a network whose request takes longer on the whole team keeps it (one thread: ~2x slower)
TEAM_FIRST = 2  # timed whole-team requests before one thread's first, both EXPLORE_BELOW_US or more: the team kept
# what a one-thread request saves its client beside its compute when the client polls for the reply (its
# compute below SPIN_S: request_path.py) instead of sleeping: the wake-up of a sleeping thread (the OD
# API SSD export on the EPYC VM, the client's time outside the daemon's compute: 30-40 us polled, 85-95 us
# asleep; one thread 0.44-0.46 ms a request, two 0.50-0.52 while both compute in 0.41-0.42 ms)
POLL_GAIN_S = 50e-6
CHOICE_REQUESTS = TEAM_FIRST + 2 * (EXPLORE_RUNS + 1)  # the requests a choice takes (benchmarks warm up past them)
# requests that ran side by side keep sharing the cores this long after: a request that
# took every core while the other one was between two requests made each connection
# thread an OpenMP team of its own, and libgomp hardly spins at barriers once a process
# has more team threads than CPUs (MobileNetV3Small, 2 requests in flight on 2 cores:
# 171 requests/s against 1570 with one thread each)
SIDE_BY_SIDE_S = 1.0


class TeamChoice:
    """The team size of a request that runs alone: `threads()` for the next request,
    `observe(threads, seconds)` its compute time. The whole team runs the first
    TEAM_FIRST + 1 requests (its first untimed: cold caches, the arena's first touch);
    a network whose timed ones all take EXPLORE_BELOW_US or more keeps the team at once
    (no program is made for one thread). Else the two sizes alternate until each has
    EXPLORE_RUNS + 1 requests timed; the one whose second fastest is faster (first runs
    left out: one thread's first compiles its program; one thread's less what its client
    saves by polling for the reply, POLL_GAIN_S, where it will) is chosen for EXPLORE_EVERY requests or
    EXPLORE_EVERY_S seconds, whichever ends first, and the two are measured again. One
    slow request never decides: an LSTM's first took 15 ms and kept the team that runs
    it 2x slower than one thread. Nor do a few disturbed ones: the second fastest, not the
    median, because what disturbs a request - another process's threads still spinning
    after its own burst, a client's - slows it and never speeds it, and slows the team,
    which needs every CPU, more than one thread (MobileNetV3Small f32 among other engines
    taking turns, `benchmarks/infer.py --interleave`: one thread chosen, 2.2 ms a request
    instead of 1.1). Racing updates only blur the statistics."""
    __slots__ = ("team", "chosen", "times", "left", "until", "turn", "clock")

    def __init__(self, team: int, clock=time.monotonic):
        self.team = team
        self.clock = clock
        self.times = self._no_times()
        self._keep(team if team <= 1 else None)  # (None: measuring)
        self.turn = False

    def _keep(self, chosen: int | None) -> None:
        self.chosen, self.left, self.until = chosen, EXPLORE_EVERY, self.clock() + EXPLORE_EVERY_S

    def threads(self) -> int:
        chosen = self.chosen
        if chosen is not None:
            self.left -= 1
            if (self.left <= 0 or self.clock() >= self.until) and self.team > 1:
                self.times, self.chosen = self._no_times(), None
            return chosen
        if len(self.times[self.team]) <= TEAM_FIRST:
            return self.team
        self.turn = not self.turn
        return 1 if self.turn else self.team

    def _no_times(self) -> dict[int, list]:
        return {self.team: [], 1: []}

    def observe(self, threads: int, seconds: float) -> None:
        times = self.times.get(threads) if self.chosen is None else None
        if times is None:
            return
        times.append(seconds)
        if threads == self.team and len(times) == TEAM_FIRST + 1 and min(times[1:]) * 1e6 >= EXPLORE_BELOW_US:
            self._keep(self.team)
        elif all(len(t) > EXPLORE_RUNS for t in self.times.values()):
            self._keep(min(self.times, key=self._cost))

    def _cost(self, threads: int) -> float:
        """What a request on `threads` costs its client (its second fastest compute, first run left
        out; one thread's less POLL_GAIN_S where its client polls for the reply)."""
        compute = sorted(self.times[threads][1:])[1]
        return compute - POLL_GAIN_S if threads == 1 and compute < SPIN_S else compute


class PlanPool:
    """Instances of one compiled network; see the module doc."""

    def __init__(self, key: tuple, network, kernels: dict, shapes: dict | None, max_instances: int,
                 source: str, extra_outputs=None, precision: str = "f32", threads: int | None = None):
        from .plan import ExecutionPlan
        from .precision import settings
        self._make = lambda: self._configure(ExecutionPlan(network, kernels, extra_outputs, precision=precision,
                                                           threads=threads))
        self.key = key
        self.network = network
        self.load_args: tuple = ()
        self.source = source
        self.name = network.name
        self._shapes = shapes
        self._max = max(1, max_instances)
        first = self._make()  # errors (unknown layer type, bad shapes) surface here
        self.custom = any(step.is_custom for step in first.steps)
        self.inputs = {n: {"shape": list(s), "precision": "FP32"} for n, s in first.input_shapes().items()}
        self.outputs = {n: {"shape": list(s), "precision": "FP32"} for n, s in first.output_shapes().items()}
        self.warnings = list(first.warnings)
        self.settings = settings(first, max_instances)  # what the load reply says the network got
        self._idle = [first]
        self._count = 1
        self.busy = 0  # plans lent out now: requests of this network running side by side
        self._side_by_side = (1, 0.0)  # (most requests at once lately, until when that holds)
        # (the lock taken directly where nothing waits: a Condition's `with` is Python code, the lock's is not)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0  # requests waiting for an instance
        self.refs = 0
        self.last_used = time.monotonic()
        self.team = TeamChoice(first.threads if first.program.backend != "numpy" else 1)

    @property
    def concurrent(self) -> int:
        """Requests of this network that share the cores now: those running, or as many as
        ran side by side within the last SIDE_BY_SIDE_S (see there)."""
        busy = self.busy
        peak, until = self._side_by_side
        return max(busy, peak) if time.monotonic() < until else busy

    def _note_side_by_side(self) -> None:
        """While requests run side by side (when one starts or ends), the window in which
        `concurrent` still counts them starts anew (call with _lock held)."""
        if self.busy > 1:
            peak, until = self._side_by_side
            now = time.monotonic()
            self._side_by_side = (max(self.busy, peak) if now < until else self.busy, now + SIDE_BY_SIDE_S)

    def chooses_team(self) -> bool:
        """Does a request get the team size TeamChoice measures (it runs alone: requests side
        by side share the cores)?"""
        return self.team.team > 1 and self.concurrent <= 1

    def _configure(self, plan):
        if self._shapes:
            plan.reshape(self._shapes)
        # one thread's program made with the plan, not by the request that first runs on it (the
        # team choice's fourth, or the first two side by side): 16-27 ms once, in a request
        plan.prepare(plan.threads)
        return plan

    @property
    def instances(self) -> int:
        return self._count

    def acquire(self) -> "_Lease":
        """`with pool.acquire() as plan:` an idle instance, one more compiled when every
        one is busy and fewer than `max_instances` exist, else the first given back."""
        return _Lease(self)

    def take(self):
        """acquire() without the `with` block, for a caller that gives the plan back
        later (a bound request: after its reply went out); give(plan) it back."""
        with self._lock:
            while True:
                if self._idle:
                    plan = self._idle.pop()
                    self.busy += 1
                    self._note_side_by_side()
                    return plan
                if self._count < self._max:
                    self._count += 1
                    break
                self._waiting += 1
                try:
                    self._cond.wait()
                finally:
                    self._waiting -= 1
        try:
            plan = self._make()
        except BaseException:
            with self._lock:
                self._count -= 1
                self._cond.notify()
            raise
        with self._lock:
            self.busy += 1
            self._note_side_by_side()
        return plan

    def give(self, plan) -> None:
        with self._lock:
            self._note_side_by_side()
            self.busy -= 1
            self._idle.append(plan)
            if self._waiting:  # (Condition.notify is Python code: not run for nobody)
                self._cond.notify()


class _Lease:
    """One plan borrowed from a pool for a `with` block (a class, not a generator-based
    context manager: contextlib's costs a request's path six Python calls)."""
    __slots__ = ("pool", "plan")

    def __init__(self, pool: PlanPool):
        self.pool, self.plan = pool, None

    def __enter__(self):
        self.plan = self.pool.take()
        return self.plan

    def __exit__(self, *exc) -> None:
        self.pool.give(self.plan)
