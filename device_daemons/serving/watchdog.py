"""`python -m device_daemons.serving.watchdog --parent PID --runtime-dir DIR`: waits
until the serving process PID asks (SIGTERM) or dies, then stops every daemon of
the runtime directory DIR (as `mo-core daemon stop --all` does: the client side's
daemon.stop for each running device) and removes DIR. See daemons.py."""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import threading


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] != b"Z"
    except OSError:
        return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="device_daemons.serving.watchdog")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--runtime-dir", required=True)
    args = parser.parse_args(argv)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(0.25):
        if os.getppid() != args.parent or not _alive(args.parent):
            break  # the server died without closing its daemons
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # finish the clean-up whatever happens now
    if os.path.isdir(args.runtime_dir):
        os.environ["MO_CORE_RUNTIME_DIR"] = args.runtime_dir
        from device_daemons.client import daemon
        try:
            for device in daemon.running_devices():
                try:
                    daemon.stop(device, grace=2)
                except Exception as err:  # noqa: BLE001 - stop the others, then remove the directory
                    print(f"[ WARNING ] stopping the {device} daemon failed: {err}", file=sys.stderr)
        finally:
            shutil.rmtree(args.runtime_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
