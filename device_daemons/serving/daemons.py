"""The device daemons a server owns: a private runtime directory
(MO_CORE_RUNTIME_DIR, 0700) in which IECore's "auto" policy starts the daemons the
models need, and a watchdog process that stops them (`mo-core daemon stop --all`
there) and removes the directory when the server closes them - or when the server
dies without closing them (kill -9, a Ray replica whose node went away), so no
daemon outlives the server that started it.

The server tells the watchdog by closing a pipe (the watchdog's stdin), not by a
signal: a SIGTERM sent before the watchdog had installed its handler killed it
without the clean-up (a replica whose model failed at once left its directory).
The kernel closes the pipe when the server dies, too.

The environment variable is set for this whole process: a serving process (the
embedded server, a Ray replica) owns its process."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from .repository import _repo_path

ENV = "MO_CORE_RUNTIME_DIR"


class OwnedDaemons:
    def __init__(self, prefix: str = "mo-serve-"):
        base = "/tmp" if os.path.isdir("/tmp") else None  # short: ipc socket paths have a length limit
        self.runtime_dir = tempfile.mkdtemp(prefix=prefix, dir=base)  # (mode 0700)
        os.environ[ENV] = self.runtime_dir
        env = dict(os.environ, PYTHONPATH=_repo_path())
        self.watchdog = subprocess.Popen(
            [sys.executable, "-m", "device_daemons.serving.watchdog", "--parent", str(os.getpid()),
             "--runtime-dir", self.runtime_dir],
            env=env, stdin=subprocess.PIPE, start_new_session=True)  # (Ctrl-C reaches the server, not it)

    def close(self, timeout: float = 60.0) -> None:
        """Stop the daemons started here: the watchdog reads the end of its pipe,
        stops them, removes the directory and exits."""
        if not self.watchdog.stdin.closed:
            self.watchdog.stdin.close()
        try:
            self.watchdog.wait(timeout)
        except subprocess.TimeoutExpired:
            self.watchdog.kill()
            self.watchdog.wait()

    def __enter__(self) -> "OwnedDaemons":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
