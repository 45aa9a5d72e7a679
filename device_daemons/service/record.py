"""The daemon's own record in the runtime directory (the format, and how clients
find and check records: device_daemons/registry.py)."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time

from core.microkernel import PROTOCOL_VERSION

from ..registry import build_id, package_version, record_path


def write_record(device: str, pid: int, endpoint: str, *, key_file: str | None = None,
                 log: str | None = None, started: float | None = None, options: list | None = None) -> dict:
    """Atomically write (or replace) the record of `device`'s daemon. `options`: the
    command-line options it was started with that a replacement must get again
    (--threads, --caffe-fallback, --python-path)."""
    record = {"device": device.upper(), "pid": pid, "endpoint": endpoint,
              "started": time.time() if started is None else started,
              "version": package_version(), "build": build_id(), "protocol": PROTOCOL_VERSION,
              "key_file": key_file, "log": log, "options": list(options or [])}
    path = record_path(device)
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".daemon-", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return record
