"""Dynamic batching: concurrent requests to one model merged into one batch of up
to `max_batch` within `delay` of the first one's arrival (Triton's
max_queue_delay_microseconds), run as one request on the daemon, results split back.

`instances` threads take batches from the queue, so that many batches are in flight
at once; a request waits on its own event."""
from __future__ import annotations

import collections
import threading
import time

import numpy as np

from .errors import unavailable


class _Pending:
    __slots__ = ("inputs", "n", "enqueued", "done", "result", "error")

    def __init__(self, inputs: dict, n: int):
        self.inputs = inputs
        self.n = n
        self.enqueued = time.perf_counter_ns()
        self.done = threading.Event()
        self.result = None
        self.error: BaseException | None = None


class DynamicBatcher:
    def __init__(self, execute, max_batch: int, delay_us: int, instances: int = 1, name: str = ""):
        """`execute(inputs {name: array with batch n}, n)` -> ({name: array}, timings)."""
        self._execute = execute
        self.max_batch = max_batch
        self.delay_ns = int(delay_us) * 1000
        self._queue: collections.deque[_Pending] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self._threads = [threading.Thread(target=self._loop, name=f"batcher-{name}-{i}", daemon=True)
                         for i in range(instances)]
        for t in self._threads:
            t.start()

    def submit(self, inputs: dict, n: int, timeout: float | None = None) -> tuple[dict, dict]:
        """Run `inputs` (batch n) as part of a batch: (outputs of these n, timings)."""
        item = _Pending(inputs, n)
        with self._cond:
            if self._closed:
                raise unavailable("the model is being unloaded")
            self._queue.append(item)
            self._cond.notify()
        if not item.done.wait(timeout):
            raise unavailable("no result within the request's time")
        if item.error is not None:
            raise item.error
        return item.result

    def _take(self) -> list[_Pending] | None:
        with self._cond:
            while not self._queue:
                if self._closed:
                    return None
                self._cond.wait()
            first = self._queue.popleft()
            batch, total = [first], first.n
            deadline = first.enqueued + self.delay_ns
            while total < self.max_batch:
                while self._queue and total + self._queue[0].n <= self.max_batch:
                    item = self._queue.popleft()
                    batch.append(item)
                    total += item.n
                left = deadline - time.perf_counter_ns()
                if total >= self.max_batch or left <= 0 or self._queue or self._closed:
                    break  # full, out of time, or the next one does not fit
                self._cond.wait(left / 1e9)
            return batch

    def _loop(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            start = time.perf_counter_ns()
            try:
                if len(batch) == 1:
                    merged, total = batch[0].inputs, batch[0].n
                else:
                    total = sum(item.n for item in batch)
                    merged = {name: np.concatenate([item.inputs[name] for item in batch])
                              for name in batch[0].inputs}
                outputs, timings = self._execute(merged, total)
                offset = 0
                for i, item in enumerate(batch):
                    part = {name: value[offset:offset + item.n] for name, value in outputs.items()}
                    offset += item.n
                    item.result = (part, dict(timings, queue_ns=start - item.enqueued, executed=int(i == 0)))
            except BaseException as exc:  # noqa: BLE001 - handed to every waiting request
                for item in batch:
                    item.error = exc
            for item in batch:
                item.done.set()

    def close(self) -> None:
        """Finish what is queued, then stop the threads."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=60)
