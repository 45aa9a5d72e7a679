"""A tiny service for the microkernel tests: `python -m tests.microkernel.echo_worker`.

Its verbs exercise every path of the server and supervisor: replies with arrays,
slow requests, crashes of every kind, and user/internal errors.
"""
from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

from core.microkernel import RemoteError, Server, serve_main


def echo(args, arrays):
    return args, arrays  # arrays referenced from args come back as references too


def add(args, arrays):
    if not arrays:
        raise RemoteError("user", "add needs at least one array")
    total = np.array(arrays[0], copy=True)
    for a in arrays[1:]:
        total = total + a
    return {"sum": total}


def sleep(args, arrays):
    time.sleep(float(args.get("seconds", 1.0)))
    return {"slept": args.get("seconds", 1.0), "tag": args.get("tag")}


def crash(args, arrays):
    how = args.get("how", "exit")
    sys.stderr.flush()
    if how == "exit":
        os._exit(int(args.get("code", 3)))
    if how == "abort":
        os.abort()
    if how == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(5)
    raise RemoteError("user", f"unknown crash mode {how!r}")


def write_stderr(args, arrays):
    sys.stderr.write(str(args.get("text", "")) + "\n")
    sys.stderr.flush()
    os.abort()


def raise_user_error(args, arrays):
    raise RemoteError(args.get("kind", "user"), args.get("message", "bad input"),
                      args.get("faq"))


def raise_internal(args, arrays):
    return {"value": 1 / 0}


def raise_base(args, arrays):
    """User code that raises what `except Exception` does not catch."""
    raise {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit,
           "GeneratorExit": GeneratorExit}[args.get("what", "KeyboardInterrupt")]()


def say(args, arrays):
    print(args.get("text", ""), file=sys.stderr, flush=True)
    return {}


def whoami(args, arrays):
    return {"pid": os.getpid(), "executable": sys.executable, "sys_path": sys.path[:3],
            "wrapper": os.environ.get("MO_CORE_TEST_WRAPPER")}


def setup(server: Server, opts) -> None:
    for fn in (echo, add, sleep, crash, write_stderr, raise_user_error, raise_internal, raise_base, say,
               whoami):
        server.handle(fn.__name__, fn)
    server.handle("lane", lambda args, arrays: {"lane": "main"})
    if opts.local:  # the local carrier (a Unix socket) with the same verbs, 'lane' saying which served it
        for fn in (echo, sleep, crash):
            server.handle(fn.__name__, fn, lane="local")
        server.handle("lane", lambda args, arrays: {"lane": "local"}, lane="local")


def _add_arguments(parser):
    parser.add_argument("--local", action="store_true", help="serve some verbs on the local carrier too")


if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1:], "echo", setup, add_arguments=_add_arguments))
