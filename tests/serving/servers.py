"""Real `mo-core serve` processes for the tests: started on free ports, their log
read as it comes (the access log is checked), stopped with SIGTERM (and checked to
leave no daemon behind)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import httpx

from tests.support import REPO

READY_LINE = re.compile(r"REST on (https?)://[^:]+:(\d+), gRPC on [^:]+:(\d+)[^;]*; (?:device daemons in (\S+))?")


class ServerProcess:
    def __init__(self, repository: str, *args, cache_dir: str, env: dict | None = None, wait_ready: bool = True,
                 timeout: float = 240.0):
        full_env = dict(os.environ, PYTHONPATH=REPO, GLOG_minloglevel="2")
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "serve", "--model_repository", repository, "--http-port", "0",
             "--grpc-port", "0", "--cache-dir", cache_dir, *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env, cwd=REPO,
            stdin=subprocess.DEVNULL)
        self.lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        match = self.wait_for(READY_LINE, 60)
        self.scheme, self.http_port, self.grpc_port, self.runtime_dir = (
            match.group(1), int(match.group(2)), int(match.group(3)), match.group(4))
        self.url = f"{self.scheme}://127.0.0.1:{self.http_port}"
        self.http = f"127.0.0.1:{self.http_port}"
        self.grpc = f"127.0.0.1:{self.grpc_port}"
        if wait_ready:
            self.wait_ready(timeout)

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pattern, timeout: float, start: int = 0):
        """The match of the first log line from `start` on that matches `pattern`."""
        pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        i = start
        with self._cond:
            while True:
                while i < len(self.lines):
                    m = pattern.search(self.lines[i])
                    i += 1
                    if m:
                        return m
                if self.proc.poll() is not None and i >= len(self.lines):
                    raise AssertionError(f"the server exited ({self.proc.returncode}):\n" + self.log_text())
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no log line matching {pattern.pattern!r} in {timeout} s:\n"
                                         + self.log_text())
                self._cond.wait(min(left, 0.5))

    def wait_ready(self, timeout: float, **client) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited ({self.proc.returncode}):\n" + self.log_text())
            try:
                if httpx.get(self.url + "/v2/health/ready", timeout=5, **client).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError("the server did not become ready:\n" + self.log_text())

    def log_text(self) -> str:
        with self._cond:
            return "\n".join(self.lines[-60:])

    def stop(self, sig=signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the server did not stop on SIGTERM:\n" + self.log_text())


def live_processes() -> list[tuple[int, bytes, list[bytes]]]:
    """(pid, command line, /proc/PID/stat fields after the name) of every live
    (non-zombie) process."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        if fields and fields[0] != b"Z":
            out.append((int(entry), cmdline, fields))
    return out


def processes_of(runtime_dir: str) -> list[int]:
    """Live processes whose command line names `runtime_dir` (the daemons and the
    watchdog of a server)."""
    return [pid for pid, cmdline, _ in live_processes() if runtime_dir.encode() in cmdline]


def wait_gone(runtime_dir: str, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = processes_of(runtime_dir)
        if not left and not os.path.exists(runtime_dir):
            return []
        time.sleep(0.1)
    return processes_of(runtime_dir)
