"""The way from a client to a device daemon (used by api.py and request_path.py):

* Link - an IECore's way to the daemon of one device. It finds the daemon through
  its record (registry.py) or the explicit endpoint, starts one with the "auto"
  policy (daemon.launch), greets it (launcher.handshake: protocol version, pid),
  and after a failure reconnects on the next request: to the daemon that runs now,
  or to a newly started one;
* Connection - one connection to one daemon incarnation: the microkernel Clients
  of its main endpoint and of its local carrier (a Unix socket, when the daemon
  is on this machine and offers one), the daemon process as far as we can watch
  it (launcher.Process), its log, whether it is dead and why, and its
  shared-memory slots (shm_client.SlotPool).

Every request goes through core/microkernel/client.py: either the Client's I/O
thread (`send` + `wait`, `call`: any thread) or the calling thread's own socket
(`call_here`, `call_raw`: inference requests, which save the I/O thread's two
hand-offs; over the local carrier they may poll for the reply before sleeping).
Which way an inference request takes is request_path.py's decision alone.
Failure detection is the Client's `watch`: while a request waits, the
daemon process is looked at every tick (the Popen when this process started the
daemon, else its pid, re-checked to still be our daemon; a remote daemon only by
timeouts): when it is gone the request fails at once with DaemonDied (its exit
status and log, and whether the next request restarts it); no reply within the
deadline is DaemonTimeout (the daemon is shared, so it is not killed).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

from core.microkernel import Client, MicrokernelError, MicrokernelTimeout, RemoteError, ServiceGone, is_loopback
from core.microkernel.launcher import Process, StartFailure, handshake

from .. import registry
from . import daemon as _daemon
from .daemon import DaemonDied, DaemonError, DaemonNotRunning, DaemonTimeout, daemon_process
from .errors import remote_error
from .shm_client import SlotPool

_ALIVE_CACHE_S = 0.05  # a liveness check this recent is trusted before a send
HELLO_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a request must be done (time.monotonic()) and the time it was given: a
    timeout names the latter, not what was left of it for the step that ran out."""
    at: float
    allowed: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)


@dataclass
class LinkSettings:
    """What a Link needs to know of its IECore."""
    policy: str = "auto"  # "auto": start a daemon when none runs; "existing": never
    timeout: float = 120.0
    startup_timeout: float = 60.0
    endpoint: str | None = None  # explicit endpoint (else: the registry's record)
    key_file: str | None = None
    shared_memory: bool = True  # the local carrier may be used (it needs shared memory)


_pid = os.getpid()  # this process's, renewed by a fork hook: a request's fork check makes no system call


def _after_fork() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork)


class Connection:
    """One connection to one daemon incarnation."""

    def __init__(self, client: Client, endpoint: str, pid: int | None, process: Process | None,
                 log: str | None, local: bool, slots: Callable[["Connection"], SlotPool]):
        self.client = client
        self.carrier: Client | None = None  # the daemon's local carrier (hello: direct.path)
        self.carrier_ops: frozenset = frozenset()  # the verbs it serves (hello: direct.ops)
        self.carrier_raw: frozenset = frozenset()  # its raw verbs (hello: direct.raw)
        self.endpoint = endpoint
        self.pid = pid
        self.process = process  # what can be watched of the daemon (None: remote)
        self.log = log
        self.local = local
        self.dead: str | None = None  # why it is considered dead
        self.checked = time.monotonic()
        self.owner = _pid  # (a forked child has its sockets, not their I/O threads: not its to use)
        self.slots = slots(self)

    @property
    def forked(self) -> bool:
        """Whether this process was forked from the one that made the connection."""
        return self.owner != _pid

    def learn(self, info: dict, key: bytes | None, timeout: float, carrier: bool) -> None:
        """Take what the daemon's hello says: its pid, its local carrier (used when
        `carrier` allows, the daemon is on this machine and no key is needed: raw
        verbs are never signed)."""
        if self.pid is None:
            self.pid = info.get("pid")
        direct = info.get("direct")
        path = direct.get("path") if isinstance(direct, dict) else None
        if not (carrier and self.local and key is None and isinstance(path, str)) or self.carrier is not None:
            return
        try:
            self.carrier = Client(self.endpoint, timeout=timeout, direct_path=path)
        except MicrokernelError:
            return  # the main endpoint serves everything anyway
        self.carrier_ops = frozenset(op for op in direct.get("ops") or () if isinstance(op, str))
        self.carrier_raw = frozenset(t for t in direct.get("raw") or () if isinstance(t, int) and not isinstance(t, bool))

    def alive(self, max_age: float = 0.0) -> bool:
        if self.dead is not None:
            return False
        now = time.monotonic()
        if max_age and now - self.checked < max_age:
            return True
        ok = self.process.alive() if self.process is not None else True
        if ok:
            self.checked = now
        return ok

    def close(self) -> None:
        self.slots.close()
        self.client.close()  # a daemon we started is long-lived: it keeps running
        if self.carrier is not None:
            self.carrier.close()


_warned_other_build: set = set()


def _warn_other_build(device: str, record: dict, policy: str) -> None:
    """Once per daemon: it runs other code than this client (an upgrade or a changed
    checkout since it started) and was not replaced."""
    if record["pid"] in _warned_other_build:
        return
    _warned_other_build.add(record["pid"])
    why = "it holds networks" if policy == "auto" else f"the policy is '{policy}'"
    print(f"[ WARNING ] {_daemon.other_build(device, record)}; it was not "
          f"replaced because {why}, so its results follow its own code. Restart it to use this one: "
          f"'mo-core daemon stop --device {device}' then 'mo-core daemon start --device {device}'",
          file=sys.stderr, flush=True)


class Link:
    """An IECore's way to the daemon of one device: connects, starts, reconnects."""

    def __init__(self, settings: LinkSettings, device: str):
        self.settings = settings
        self.device = device
        self._lock = threading.RLock()  # (a failure seen while connecting drops under it)
        self._conn: Connection | None = None
        self.closed = False

    # ----------------------------------------------------------------- connect
    def connection(self) -> Connection:
        conn = self._conn
        if conn is not None and conn.forked:  # (before any lock: a parent's thread may hold it)
            raise DaemonError(f"this process (pid {_pid}) was forked from pid {conn.owner} after its IECore "
                              f"connected to the {self.device} daemon: ZeroMQ sockets and the client's threads do "
                              f"not survive fork. Make a new IECore in the child (or start children with "
                              f"multiprocessing's 'spawn' method)")
        if conn is not None and conn.alive(_ALIVE_CACHE_S):
            return conn
        with self._lock:
            if self.closed:
                raise DaemonError("this IECore was closed")
            conn = self._conn
            if conn is not None and conn.alive():
                return conn
            if conn is not None:
                self._drop(conn, conn.dead or "gone")
            self._conn = self._connect()
            return self._conn

    def _connect(self) -> Connection:
        st = self.settings
        process = None
        info = None
        if st.endpoint:
            endpoint, key_file, pid, log = st.endpoint, st.key_file, None, None
        else:
            record = registry.read_record(self.device)
            if record is None and st.policy != "auto":
                raise DaemonNotRunning(
                    f"no {self.device} daemon is running and the policy is '{st.policy}'; "
                    f"start one with 'mo-core daemon start --device {self.device}' (or allow "
                    f"starting one: IECore(policy='auto'), no --no-auto-start)")
            if st.policy == "auto" and (record is None or _daemon.is_other_build(record)):
                # (a daemon of other code that holds no network is replaced: daemon.launch)
                launch = _daemon.launch(self.device, startup_timeout=st.startup_timeout,
                                        replace_other_build=True)
                record, process, info = launch.record, launch.proc, launch.info
            if _daemon.is_other_build(record):
                _warn_other_build(self.device, record, st.policy)
            endpoint, key_file = record["endpoint"], record.get("key_file")
            pid, log = record["pid"], record.get("log")
            if process is None:
                process = daemon_process(pid)
        key = _daemon.load_key(key_file)
        local = (endpoint.startswith("ipc://") or is_loopback(endpoint)) and pid is not None
        try:
            client = Client(endpoint, timeout=st.timeout, key=key)
        except MicrokernelError as exc:
            raise DaemonError(f"cannot connect to the {self.device} daemon at {endpoint}: {exc}") from None

        def slots(conn: Connection) -> SlotPool:
            return SlotPool(local and st.shared_memory,
                            lambda op, args: self.wait(conn, self.send(conn, op, args), op,
                                                       Deadline.after(min(HELLO_TIMEOUT, st.timeout)))[0],
                            lambda op, args: conn.client.call_async(op, args))
        conn = Connection(client, endpoint, pid, process, log, local, slots)
        if info is None:
            info = self._hello(conn)
        conn.learn(info, key, st.timeout, st.shared_memory)
        return conn

    def _hello(self, conn: Connection) -> dict:
        timeout = min(HELLO_TIMEOUT, self.settings.timeout)
        restart = (f"restart it: 'mo-core daemon stop --device {self.device}' then "
                   f"'mo-core daemon start --device {self.device}'")
        try:
            return handshake(conn.client, conn.process, timeout, expect_pid=conn.pid)
        except StartFailure as exc:
            if exc.reason == "exited":
                raise self._died(conn, "hello") from None
            conn.close()
            if exc.reason == "timeout":
                raise DaemonError(f"the {self.device} daemon (pid {conn.pid}) at {conn.endpoint} does not "
                                  f"answer within {timeout:g} s; {restart}") from None
            raise DaemonError(f"the {self.device} daemon at {conn.endpoint}: {exc}; {restart}") from None

    def _drop(self, conn: Connection, why: str) -> None:
        """Forget a dead or unwanted connection (call with self._lock held)."""
        if conn.dead is None:
            conn.dead = why
        conn.close()
        if self._conn is conn:
            self._conn = None

    def close(self) -> None:
        conn = self._conn
        if conn is not None and conn.forked:  # the parent's to close
            self.closed, self._conn = True, None
            return
        with self._lock:
            self.closed = True
            if self._conn is not None:
                self._drop(self._conn, "closed")

    # ----------------------------------------------------------------- requests
    def send(self, conn: Connection, op: str, args: dict | None = None, arrays=None):
        """Send `op` through the connection's I/O thread: its PendingCall."""
        try:
            return conn.client.call_async(op, args, arrays)
        except MicrokernelError as exc:
            if conn.dead is not None:
                raise self._died_error(conn, op) from None
            raise DaemonError(f"cannot send '{op}' to the {self.device} daemon at "
                              f"{conn.endpoint}: {exc}") from None

    def wait(self, conn: Connection, pending, op: str, deadline: Deadline) -> tuple[dict, list]:
        """The reply of `pending`, watching the daemon; raises DaemonDied / DaemonTimeout
        / RemoteError (the daemon's error reply)."""
        return self._outcome(conn, op, deadline, pending.result, watch=conn)

    def call_here(self, conn: Connection, op: str, args: dict, deadline: Deadline, *,
                  carrier: bool = False) -> dict:
        """Request/reply of `op` on the calling thread's own socket: over the local
        carrier when `carrier` (the connection must have one), else to the daemon's
        main endpoint. The result; raises like wait()."""
        client = conn.carrier if carrier else conn.client
        return self._outcome(conn, op, deadline, client.call, op, args, watch=conn, direct=True)[0]

    def call_raw(self, conn: Connection, op: str, tag: int, payload: bytes, deadline: Deadline,
                 spin: float = 0.0) -> bytes | None:
        """The raw verb `tag` (the request `op`, as errors name it) over the local
        carrier, on the calling thread, polling for the reply for `spin` s before
        sleeping: the reply's payload; None when it cannot be sent there. Raises like
        wait()."""
        return self._outcome(conn, op, deadline, conn.carrier.call_raw, tag, payload, watch=conn, spin=spin)

    def _outcome(self, conn: Connection, op: str, deadline: Deadline, receive, *args, **kwargs):
        """receive(*args, timeout=<left until deadline>, **kwargs)'s reply, with the
        microkernel's failures as the daemon's (the call passed apart: a lambda would
        cost a request's path a call)."""
        timeout = max(0.0, deadline.at - time.monotonic())
        try:
            return receive(*args, timeout=timeout, **kwargs)
        except RemoteError:
            raise
        except ServiceGone:
            raise self._died(conn, op) from None
        except MicrokernelTimeout:
            raise self._timeout(conn, op, deadline.allowed) from None
        except MicrokernelError as exc:
            if conn.dead is not None or not conn.alive():
                raise self._died(conn, op) from None
            raise DaemonError(f"'{op}' to the {self.device} daemon failed: {exc}") from None

    def call(self, op: str, args: dict | None = None, arrays=None, timeout: float | None = None):
        """Connect (start) as needed and call `op`: (result, arrays); the daemon's
        error reply becomes an InferenceError / DaemonError."""
        conn = self.connection()
        t = self.settings.timeout if timeout is None else timeout
        pending = self.send(conn, op, args, arrays)
        try:
            return self.wait(conn, pending, op, Deadline.after(t))
        except RemoteError as exc:
            raise remote_error(exc, self.device) from None

    # ----------------------------------------------------------------- failures
    def _died(self, conn: Connection, op: str) -> DaemonDied:
        with self._lock:
            if conn.dead is None:
                status = conn.process.exit_status() if conn.process is not None else "is gone"
                conn.dead = f"{status} during '{op}'"
            self._drop(conn, conn.dead)
        return self._died_error(conn, op)

    def _died_error(self, conn: Connection, op: str) -> DaemonDied:
        msg = f"the {self.device} daemon (pid {conn.pid}) {conn.dead}"
        if "during" not in (conn.dead or ""):
            msg += f" (request '{op}')"
        msg += "; the request was lost."
        if conn.log:
            msg += f" Its log: {conn.log}."
        if self.settings.policy == "auto" and not self.settings.endpoint:
            msg += " The next request starts a new daemon and loads the network again."
        else:
            msg += (f" Start a new one with 'mo-core daemon start --device {self.device}'; the "
                    f"next request then loads the network again.")
        return DaemonDied(msg)

    def _timeout(self, conn: Connection, op: str, allowed: float) -> DaemonTimeout:
        return DaemonTimeout(
            f"no reply from the {self.device} daemon (pid {conn.pid}) to '{op}' within "
            f"{allowed:g} s; it is still running (busy, or hung). Give the request more time (a request's "
            f"timeout=, IECore(timeout=...), --timeout of mo-core infer / benchmark), or, if it is hung, restart "
            f"it: 'mo-core daemon stop --device {self.device}' then 'mo-core daemon start --device "
            f"{self.device}'")
