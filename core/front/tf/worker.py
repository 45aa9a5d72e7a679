"""The converter's TensorFlow worker: one process per converter process, started
on the first request (freezing, the shape-inference fallback, `--validate`) and
reused by later ones, so TensorFlow is imported once however many conversions a
process runs. A worker that died or hung is dropped; the next request starts a
new one. It stops with stop_worker() or when this process ends (the launcher's
finalizer and the worker's parent watch: no orphan). It runs in the OS sandbox
(core/microkernel/sandbox.py) with no file of the host but the system's: a freeze
request starts a worker that also sees the model's files (and the directory it
writes the frozen graph to), and only those.

MO_CORE_TF_PYTHON chooses its interpreter (a venv with TensorFlow), the core's
own by default; MO_CORE_TF_TIMEOUT (seconds, default 600) bounds each request.
"""
from __future__ import annotations

import os
import threading

from core.errors import Error

_lock = threading.Lock()
_worker = None


def timeout() -> float:
    from core.services import tf_worker as contract
    value = os.environ.get(contract.TIMEOUT_ENV, "600")
    try:
        seconds = float(value)
    except ValueError:
        raise Error("{}={!r} is not a number of seconds.", contract.TIMEOUT_ENV, value) from None
    if not seconds > 0:
        raise Error("{} must be a positive number of seconds, got {!r}.", contract.TIMEOUT_ENV, value)
    return seconds


def _get(sandbox):
    """The worker for a request needing the view `sandbox` (one with no files of its
    own is served by any)."""
    global _worker
    from core.microkernel import WorkerProcess
    from core.services import tf_worker as contract
    python = contract.worker_python()
    with _lock:
        if _worker is not None and (_worker.interpreter != python or (
                any(sandbox.view()) and _worker.sandbox.view() != sandbox.view())
                or (_worker.pid is not None and not _worker.alive())):
            # (another interpreter or view; or it died since its last request - killed while idle, the
            # OOM killer: with no restart budget it would fail this request for a death it had no part in)
            _worker.stop()
            _worker = None
        if _worker is None:
            _worker = WorkerProcess(contract.WORKER_MODULE, name="tf", interpreter=python, startup_timeout=180,
                                    request_timeout=timeout(), restart_budget=0, env=contract.WORKER_ENV,
                                    sandbox=sandbox)
        return _worker


def call(op: str, args: dict, arrays: list, task: str, failed: str | None = None, sandbox=None):
    """(result, arrays) of a TF worker verb. Failures are Errors that say what
    was being done (`task`, e.g. "freezing the SavedModel x"): TensorFlow missing
    (FAQ #41), TensorFlow's own message after `failed` (default "TensorFlow failed
    <task>"), the worker's death or a hang (it is stopped; the next call starts a
    new one). `sandbox`: the files the request needs to see (default: none)."""
    from core.microkernel import MicrokernelError, MicrokernelTimeout, RemoteError, WorkerError
    from core.microkernel.sandbox import Sandbox
    from core.services import tf_worker as contract
    try:
        worker = _get(sandbox or Sandbox())
    except WorkerError as exc:  # MO_CORE_SANDBOX=require on a machine without it
        raise Error("The TensorFlow worker cannot start: {}", exc) from None
    seconds = timeout()
    try:
        return worker.call(op, args, arrays, timeout=seconds)
    except RemoteError as exc:
        if exc.kind == contract.FRAMEWORK_MISSING:
            raise Error("{} needs TensorFlow, which the TF worker cannot import: {}", task[:1].upper() + task[1:],
                        exc.message, faq=41) from None
        raise Error("{}: {}", failed or "TensorFlow failed " + task, exc.message) from None
    except (WorkerError, MicrokernelTimeout, MicrokernelError) as exc:
        stop_worker()
        if isinstance(exc, MicrokernelTimeout):
            raise Error("The TensorFlow worker did not finish {} in {:g} s: {}. If TensorFlow is only slow here, "
                        "allow it more time with {}=SECONDS.", task, seconds, exc, contract.TIMEOUT_ENV) from None
        raise Error("The TensorFlow worker ({}) failed while {}: {}", worker.interpreter, task, exc) from None


def worker_pid() -> int | None:
    """The running worker's pid (None when there is none)."""
    with _lock:
        return _worker.pid if _worker is not None else None


def stop_worker():
    global _worker
    with _lock:
        worker, _worker = _worker, None
    if worker is not None:
        worker.stop()
