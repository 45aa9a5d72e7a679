"""`python -m device_daemons.serving.watchdog --parent PID --runtime-dir DIR`: waits
until the serving process PID closes the watchdog's stdin (a pipe: OwnedDaemons.close,
or the kernel when PID dies), dies, or a SIGTERM/SIGINT/SIGHUP asks, then stops every
daemon of the runtime directory DIR (as `mo-core daemon stop --all` does: the client
side's daemon.stop for each running device) and removes DIR. See daemons.py."""
from __future__ import annotations

import signal
import threading

DONE = threading.Event()
# first thing: a signal from the very start on still cleans up (the default action would not)
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_sig, lambda *_: DONE.set())

import argparse  # noqa: E402 - after the handlers
import os  # noqa: E402
import shutil  # noqa: E402
import stat  # noqa: E402
import sys  # noqa: E402


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2:data.rindex(b")") + 3] != b"Z"
    except OSError:
        return False


def _until_eof(fd: int) -> None:
    """Read the server's pipe until it is closed: the server's close() or its death
    (no signal to race with this process's start)."""
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass
    DONE.set()


def _stop_daemons(runtime_dir: str) -> None:
    os.environ["MO_CORE_RUNTIME_DIR"] = runtime_dir
    from device_daemons.client import daemon
    try:
        for device in daemon.running_devices():
            try:
                daemon.stop(device, grace=2)
            except Exception as err:  # noqa: BLE001 - stop the others, then remove the directory
                print(f"[ WARNING ] stopping the {device} daemon failed: {err}", file=sys.stderr)
    finally:
        shutil.rmtree(runtime_dir, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="device_daemons.serving.watchdog")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--runtime-dir", required=True)
    args = parser.parse_args(argv)
    if stat.S_ISFIFO(os.fstat(0).st_mode):  # (started by OwnedDaemons: its pipe)
        threading.Thread(target=_until_eof, args=(0,), daemon=True).start()
    while not DONE.wait(0.25):
        if os.getppid() != args.parent or not _alive(args.parent):
            break  # the server died without closing its daemons (and a child of it holds the pipe)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # finish the clean-up whatever happens now
    if os.path.isdir(args.runtime_dir):
        _stop_daemons(args.runtime_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
