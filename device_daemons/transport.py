"""The way from a client to a device daemon (used by client.py and infer_job.py):

* Link - an IECore's way to the daemon of one device. It finds the daemon through
  its record (registry.py) or the explicit endpoint, starts one with the "auto"
  policy (daemon.launch), checks it with `hello` (protocol version, pid), and
  after a failure reconnects on the next request: to the daemon that runs now, or
  to a newly started one;
* Connection - one connection to one daemon incarnation: the microkernel Client,
  the daemon's pid / process / log, whether it is dead and why, and its
  shared-memory slots (shm_client.py);
* FastChannel - the calling thread's own socket for synchronous requests.

Failure detection: while a request waits, the daemon process is looked at every
_TICK s (the Popen object when this process started the daemon, else its pid;
a remote daemon only by timeouts): when it is gone the request fails at once with
DaemonDied (its exit status and log, and whether the next request restarts it);
no reply within the deadline is DaemonTimeout (the daemon is shared, so it is not
killed).

Requests are multiplexed by id on the Client (any thread); fast_call() sends and
receives on the calling thread's FastChannel instead, saving the two thread
hand-offs of the Client's I/O thread.
"""
from __future__ import annotations

import collections
import itertools
import os
import threading
import time
from typing import TYPE_CHECKING

import zmq

from core.microkernel import (DEFAULT_LIMITS, PROTOCOL_VERSION, Client, MicrokernelError,
                              ProtocolError, RemoteError, decode_reply, encode_request,
                              is_loopback, sign_frames, verify_frames)
from core.microkernel.protocol import peek_id
from core.microkernel.supervisor import describe_exit

from . import daemon as _daemon
from . import registry
from .daemon import DaemonDied, DaemonError, DaemonNotRunning, DaemonTimeout
from .errors import remote_error

if TYPE_CHECKING:
    from .client import IECore
    from .shm_client import ShmSlot

_TICK = 0.1  # how often a waiting request looks at the daemon process
_ALIVE_CACHE_S = 0.05  # a liveness check this recent is trusted before a send
# A reply from the daemon's fast lane (a network that computes in well under a
# millisecond) is awaited by polling the socket for up to this long before sleeping:
# waking a sleeping thread costs ~0.1 ms on a VM, more than the request itself.
# MO_CORE_SPIN_US=0 turns it off.
SPIN_S = float(os.environ.get("MO_CORE_SPIN_US", "500")) / 1e6
HELLO_TIMEOUT = 10.0
_gen = itertools.count(1)


class Connection:
    """One connection to one daemon incarnation."""

    def __init__(self, client: Client, endpoint: str, pid: int | None, proc, log: str | None,
                 local: bool):
        self.client = client
        self.endpoint = endpoint
        self.pid = pid
        self.proc = proc  # subprocess.Popen when this process started the daemon
        self.log = log
        self.local = local
        self.gen = next(_gen)
        self.dead: str | None = None  # why it is considered dead
        self.checked = time.monotonic()
        self.shm_ok: bool | None = None if local else False  # False: use array frames
        self.shm_free: list[ShmSlot] = []
        self.shm_lock = threading.Lock()
        # slots lent to the caller with outputs that were collected since: appended
        # by a finalizer (any thread, any time: so nothing but an atomic append)
        self.shm_returned: collections.deque = collections.deque()
        self.fast_endpoint: str | None = None  # the daemon's fast lane (hello: lanes.fast)

    def learn(self, info: dict) -> None:
        """Take what the daemon's hello says about its lanes."""
        lanes = info.get("lanes")
        fast = lanes.get("fast") if isinstance(lanes, dict) else None
        if isinstance(fast, str):
            if fast.startswith("tcp://") and self.endpoint.startswith("tcp://"):
                # the daemon reports the interface it bound; reach it like the main one
                fast = self.endpoint.rsplit(":", 1)[0] + ":" + fast.rsplit(":", 1)[1]
            self.fast_endpoint = fast

    def alive(self, max_age: float = 0.0) -> bool:
        if self.dead is not None:
            return False
        now = time.monotonic()
        if max_age and now - self.checked < max_age:
            return True
        if self.proc is not None:
            ok = self.proc.poll() is None  # also reaps it
        elif self.local and self.pid is not None:
            ok = registry.is_daemon_process(self.pid)
        else:
            ok = True  # a remote daemon: only timeouts tell
        if ok:
            self.checked = now
        return ok


class FastChannel:
    """A DEALER socket owned by one calling thread, for synchronous requests.

    The microkernel Client hands every request to its I/O thread and every reply
    back (two thread hand-offs, ~0.1 ms on a small VM); a synchronous infer() sends
    and receives on its own thread's socket instead. Only the owning thread ever
    touches the socket; it is replaced when the connection changes and closed with
    the thread (garbage collection of the thread-local)."""

    def __init__(self, conn: Connection, key: bytes | None, endpoint: str):
        self.gen = conn.gen
        self.key = key
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.MAXMSGSIZE, DEFAULT_LIMITS.max_message_bytes)
        self.sock.connect(endpoint)
        self.rcvtimeo = -1
        self.ids = itertools.count(1)

    def close(self) -> None:
        self.sock.close(0)

    def __del__(self):  # the owning thread ended
        try:
            self.sock.close(0)
        except Exception:  # noqa: BLE001
            pass


class Link:
    """An IECore's way to the daemon of one device: connects, starts, reconnects."""

    def __init__(self, core: "IECore", device: str):
        self.core = core
        self.device = device
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self.closed = False
        self._local = threading.local()  # the calling thread's FastChannel
        self.key: bytes | None = None

    # ----------------------------------------------------------------- connect
    def connection(self) -> Connection:
        conn = self._conn
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
        core = self.core
        proc = None
        started = False
        info = None
        if core.endpoint:
            endpoint, key_file, pid, log = core.endpoint, core.key_file, None, None
        else:
            record = registry.read_record(self.device)
            if record is None:
                if core.policy != "auto":
                    raise DaemonNotRunning(
                        f"no {self.device} daemon is running and the policy is '{core.policy}'; "
                        f"start one with 'mo-core daemon start --device {self.device}' (or allow "
                        f"starting one: IECore(policy='auto'), no --no-auto-start)")
                launch = _daemon.launch(self.device, startup_timeout=core.startup_timeout)
                record, proc, started = launch.record, launch.proc, launch.started
                info = launch.info
            endpoint, key_file = record["endpoint"], record.get("key_file")
            pid, log = record["pid"], record.get("log")
        key = self.key = _daemon.load_key(key_file)
        local = endpoint.startswith("ipc://") or is_loopback(endpoint)
        try:
            client = Client(endpoint, timeout=core.timeout, key=key)
        except MicrokernelError as exc:
            raise DaemonError(f"cannot connect to the {self.device} daemon at {endpoint}: {exc}") from None
        conn = Connection(client, endpoint, pid, proc, log, local and (pid is not None))
        if not core.shared_memory:
            conn.shm_ok = False
        if started and info:
            conn.learn(info)
        else:
            self._hello(conn)
        return conn

    def _hello(self, conn: Connection) -> None:
        timeout = min(HELLO_TIMEOUT, self.core.timeout)
        try:
            info, _ = self.wait(conn, conn.client.call_async("hello"), "hello",
                                time.monotonic() + timeout)
        except DaemonTimeout:
            conn.client.close()
            raise DaemonError(
                f"the {self.device} daemon (pid {conn.pid}) at {conn.endpoint} does not answer "
                f"within {timeout:g} s; restart it: 'mo-core daemon stop --device {self.device}' "
                f"then 'mo-core daemon start --device {self.device}'") from None
        except BaseException:
            conn.client.close()
            raise
        if info.get("version") != PROTOCOL_VERSION:
            conn.client.close()
            raise DaemonError(f"the {self.device} daemon at {conn.endpoint} speaks protocol "
                              f"{info.get('version')!r}, this client {PROTOCOL_VERSION}; restart it")
        if conn.pid is not None and info.get("pid") != conn.pid:
            conn.client.close()
            raise DaemonError(f"the daemon at {conn.endpoint} is pid {info.get('pid')}, not the "
                              f"recorded pid {conn.pid}; restart it with 'mo-core daemon stop' and "
                              f"'mo-core daemon start'")
        if conn.pid is None:
            conn.pid = info.get("pid")
        conn.learn(info)

    def _drop(self, conn: Connection, why: str) -> None:
        """Forget a dead or unwanted connection (call with self._lock held)."""
        if conn.dead is None:
            conn.dead = why
        conn.client.close()  # a daemon we started is long-lived: it keeps running
        if self._conn is conn:
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self.closed = True
            if self._conn is not None:
                self._drop(self._conn, "closed")

    # ----------------------------------------------------------------- requests
    def send(self, conn: Connection, op: str, args: dict | None = None, arrays=None):
        try:
            return conn.client.call_async(op, args, arrays)
        except RemoteError:
            raise
        except MicrokernelError as exc:
            if conn.dead is not None:
                raise self._died_error(conn, op) from None
            raise DaemonError(f"cannot send '{op}' to the {self.device} daemon at "
                              f"{conn.endpoint}: {exc}") from None

    def wait(self, conn: Connection, pending, op: str, deadline: float) -> tuple[dict, list]:
        """The reply of `pending`, watching the daemon; raises DaemonDied / DaemonTimeout
        / RemoteError (the daemon's error reply)."""
        while True:
            now = time.monotonic()
            if pending.wait(max(0.0, min(_TICK, deadline - now))):
                break
            if not conn.alive():
                if pending.wait(0.05):  # answered just before dying
                    break
                pending.cancel()
                raise self._died(conn, op)
            if time.monotonic() >= deadline:
                pending.cancel()
                raise self._timeout(conn, op)
        try:
            return pending.result(0)
        except RemoteError:
            raise
        except MicrokernelError as exc:
            if conn.dead is not None or not conn.alive():
                raise self._died(conn, op) from None
            raise DaemonError(f"'{op}' to the {self.device} daemon failed: {exc}") from None

    def _died(self, conn: Connection, op: str) -> DaemonDied:
        with self._lock:
            first = conn.dead is None
            if first:
                if conn.proc is not None:
                    conn.proc.poll()
                    status = describe_exit(conn.proc.returncode)
                else:
                    status = "is gone"
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
        if self.core.policy == "auto" and not self.core.endpoint:
            msg += " The next request starts a new daemon and loads the network again."
        else:
            msg += (f" Start a new one with 'mo-core daemon start --device {self.device}'; the "
                    f"next request then loads the network again.")
        return DaemonDied(msg)

    def fast_call(self, conn: Connection, verb: str, args: dict, deadline: float, op: str = "",
                  endpoint: str | None = None, spin: float = 0.0) -> dict:
        """Request/reply of `verb` on the calling thread's own socket (see FastChannel)
        to `endpoint` (default: the daemon's main one), polling for the reply for
        `spin` s before sleeping: the result; raises RemoteError, DaemonDied,
        DaemonTimeout like wait(). `op` names the request in messages."""
        op = op or verb
        endpoint = endpoint or conn.endpoint
        chans = getattr(self._local, "chans", None)
        if chans is None:
            chans = self._local.chans = {}
        chan = chans.get(endpoint)
        if chan is None or chan.gen != conn.gen:
            if chan is not None:
                chan.close()
            if conn.dead is not None:
                raise self._died_error(conn, op)
            chan = chans[endpoint] = FastChannel(conn, self.key, endpoint)
        req_id = next(chan.ids)
        try:
            frames = encode_request(req_id, verb, args)
        except ProtocolError as exc:
            raise DaemonError(f"cannot send '{op}': {exc}") from None
        if chan.key is not None:
            frames = sign_frames(chan.key, frames)
        sock = chan.sock
        try:
            sock.send_multipart(frames, copy=False)
            spin_reply = None
            if spin:
                until = time.perf_counter() + spin
                while spin_reply is None:
                    try:
                        spin_reply = sock.recv_multipart(copy=False, flags=zmq.NOBLOCK)
                    except zmq.Again:
                        if time.perf_counter() > until:
                            break
            while True:
                # a blocking receive with a timeout (RCVTIMEO) is cheaper than a poll()
                wait_ms = max(1, int(min(_TICK, deadline - time.monotonic()) * 1000))
                if wait_ms != chan.rcvtimeo:
                    sock.setsockopt(zmq.RCVTIMEO, wait_ms)
                    chan.rcvtimeo = wait_ms
                if spin_reply is not None:
                    reply, spin_reply = spin_reply, None
                else:
                    try:
                        reply = sock.recv_multipart(copy=False)
                    except zmq.Again:
                        reply = None
                if reply is not None:
                    if chan.key is not None:
                        try:
                            reply = verify_frames(chan.key, reply)
                        except ProtocolError:
                            continue  # not from our daemon: ignore
                    try:
                        decoded = decode_reply(reply)
                    except ProtocolError as exc:
                        if peek_id(reply) == req_id:
                            raise DaemonError(f"malformed reply from the {self.device} daemon: {exc}") from None
                        continue
                    if decoded.id != req_id:
                        continue  # a late reply to a request that timed out
                    return decoded.unwrap()[0]
                if not conn.alive():
                    raise self._died(conn, op)
                if time.monotonic() >= deadline:
                    raise self._timeout(conn, op)
        except zmq.ZMQError as exc:
            chans.pop(endpoint, None)
            chan.close()
            raise DaemonError(f"'{op}' to the {self.device} daemon failed: {exc}") from None

    def _timeout(self, conn: Connection, op: str) -> DaemonTimeout:
        return DaemonTimeout(
            f"no reply from the {self.device} daemon (pid {conn.pid}) to '{op}' within "
            f"{self.core.timeout:g} s; it is still running (busy or hung). Raise the timeout "
            f"(IECore(timeout=...)) or restart it: 'mo-core daemon stop --device "
            f"{self.device}' then 'mo-core daemon start --device {self.device}'")

    def call(self, op: str, args: dict | None = None, arrays=None, timeout: float | None = None):
        """Connect (start) as needed and call `op`: (result, arrays)."""
        conn = self.connection()
        t = self.core.timeout if timeout is None else timeout
        pending = self.send(conn, op, args, arrays)
        try:
            return self.wait(conn, pending, op, time.monotonic() + t)
        except RemoteError as exc:
            raise remote_error(exc, self.device) from None

