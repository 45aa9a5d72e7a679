"""A real two-node Ray cluster on this machine for the Ray-mode tests: `ray start
--head` and a second `ray start --address`, each in a session of its own (so that
each node's processes can be stopped by their process group), on loopback, with
small object stores and temp dirs of their own. Nodes are stopped by signalling
their process groups (never `ray stop`, which would stop every Ray on the machine)."""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time

from tests.support import REPO

from .servers import live_processes

RAY = os.path.join(os.path.dirname(sys.executable), "ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_members(pgid: int) -> list[int]:
    return [pid for pid, _, fields in live_processes() if int(fields[2]) == pgid]


class RayCluster:
    def __init__(self, cpus_per_node: int = 2):
        self.temp = tempfile.mkdtemp(prefix="rt-", dir="/tmp")  # short: Ray's socket paths
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # token authentication with a token of this cluster only (Ray would otherwise
        # use, or write, ~/.ray/auth_token): every node and client gets it from the environment
        self.auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        self.env = dict(os.environ, PYTHONPATH=REPO, GLOG_minloglevel="2", RAY_USAGE_STATS_ENABLED="0", **self.auth)
        self.cpus = cpus_per_node
        self.groups: list[int] = []
        try:
            self._start("--head", "--port", str(self.port), "--temp-dir", self.temp, "--include-dashboard", "false")
            self.worker_group = self.start_worker()
        except BaseException:
            self.stop()
            raise

    def _start(self, *args) -> int:
        proc = subprocess.run([RAY, "start", *args, "--node-ip-address", "127.0.0.1", "--num-cpus", str(self.cpus),
                               "--object-store-memory", str(150 << 20), "--disable-usage-stats"],
                              env=self.env, capture_output=True, text=True, timeout=120, start_new_session=True)
        # `ray start` runs in a new session: the node's processes keep its process group
        assert proc.returncode == 0, proc.stdout + proc.stderr
        pgid = self._newest_group()
        self.groups.append(pgid)
        return pgid

    def _newest_group(self) -> int:
        """The process group of the raylet started last (its `ray start` has exited)."""
        best = None
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"raylet" in cmd.split(b"\0")[0] and self.temp.encode() in cmd:
                pgid = os.getpgid(int(entry))
                if pgid not in self.groups and (best is None or int(entry) > best[0]):
                    best = (int(entry), pgid)
        assert best is not None, "no raylet of this cluster found"
        return best[1]

    def start_worker(self) -> int:
        return self._start("--address", self.address)

    def stop_group(self, pgid: int, grace: float = 10.0) -> None:
        """Stop one node (or the head) the way a machine going away does: SIGTERM to
        its processes, SIGKILL to what is left."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            members = group_members(pgid)
            if not members:
                break
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while group_members(pgid) and time.monotonic() < deadline:
                time.sleep(0.2)
        if pgid in self.groups:
            self.groups.remove(pgid)

    def stop(self) -> None:
        for pgid in reversed(list(self.groups)):
            self.stop_group(pgid)
        subprocess.run(["rm", "-rf", self.temp])
