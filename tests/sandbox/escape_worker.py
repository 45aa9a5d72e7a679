"""A worker that tries to get out, for the sandbox tests: what a framework worker
could do if a model got past the allow-list (`python -m tests.sandbox.escape_worker`,
launched the production way: WorkerProcess with a Sandbox, like the TF and Caffe
workers). Each verb tries one thing and says what happened (errno names), so the
test can check that the sandbox, not luck, stopped it.
"""
from __future__ import annotations

import errno
import os
import socket
import sys
import time

from core.microkernel import serve_main


def _errno(fn):
    try:
        result = fn()
    except OSError as exc:
        return {"ok": False, "errno": errno.errorcode.get(exc.errno, str(exc.errno))}
    return {"ok": True, "result": result}


def read(args, arrays):
    def go():
        with open(args["path"], "rb") as f:
            return f.read(64).decode("utf-8", "replace")
    return _errno(go)


def write(args, arrays):
    def go():
        with open(args["path"], "w") as f:
            f.write("pwned")
        return args["path"]
    return _errno(go)


def listdir(args, arrays):
    return _errno(lambda: sorted(os.listdir(args["path"])))


def open_socket(args, arrays):
    family = getattr(socket, args["family"])

    def go():
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            if args.get("connect"):
                sock.connect(tuple(args["connect"]) if family != socket.AF_UNIX else args["connect"])
        finally:
            sock.close()
        return "made"
    return _errno(go)


def signal_process(args, arrays):
    return _errno(lambda: os.kill(int(args["pid"]), 0))


def allocate(args, arrays):
    try:
        block = bytearray(int(args["mb"]) << 20)
    except MemoryError:
        return {"ok": False, "errno": "MemoryError"}
    return {"ok": True, "result": len(block)}


def open_many(args, arrays):
    files = []
    try:
        for _ in range(int(args["n"])):
            files.append(open("/dev/null"))
    except OSError as exc:
        return {"ok": False, "errno": errno.errorcode.get(exc.errno), "opened": len(files)}
    finally:
        for f in files:
            f.close()
    return {"ok": True, "opened": len(files)}


def spin(args, arrays):
    end = time.monotonic() + float(args["seconds"])
    n = 0
    while time.monotonic() < end:
        n += 1
    return {"ok": True, "result": n}


def start_process(args, arrays):
    """fork(), and a thread (which must still work: TensorFlow and oneDNN make them)."""
    import threading
    box = []
    thread = threading.Thread(target=lambda: box.append("thread ran"))
    thread.start()
    thread.join()

    def go():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return "forked"
    return dict(_errno(go), thread=box)


def fill_tmpfs(args, arrays):
    """Write `mb` MiB to `path` (a tmpfs is host memory)."""
    def go():
        with open(args["path"], "wb") as f:
            for _ in range(int(args["mb"])):
                f.write(b"\0" * (1 << 20))
        return args["mb"]
    try:
        return _errno(go)
    finally:
        if os.path.exists(args["path"]):
            os.unlink(args["path"])


def _setup(server, opts):
    for verb in (read, write, listdir, open_socket, signal_process, allocate, open_many, spin, start_process,
                 fill_tmpfs):
        server.handle(verb.__name__, verb)
    server.info["whoami"] = {"pid": os.getpid(), "uid": os.getuid()}


if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1:], "escape", _setup))
