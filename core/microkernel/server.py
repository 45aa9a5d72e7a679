"""The serving side: a request loop for worker processes and device daemons.

Threading model: the thread that calls `serve()` is the I/O thread; it alone owns
the ROUTER socket. It receives, decodes and dispatches requests, and sends every
reply. Handlers run either inline in the I/O thread (built-in verbs, handlers
registered with inline=True, or every handler when threads=0) or on a pool of N
plain threads fed by a queue; a pool thread encodes (and signs) its reply and
hands it back through a Mailbox (queue + pipe the I/O thread polls), so sockets
never cross threads. A slow request on the pool never delays `ping`/`hello`.

Every reply is sent to the ROUTER identity the request came from, with the
request's id, so concurrent clients can never receive each other's replies.

Local clients may also reach the verbs of the local lane over a Unix seqpacket
socket beside the endpoint (the local carrier, direct.py), where each connection
has a thread of its own that receives, runs the handler and replies: a request
crosses no thread but the client's and that one.

The loop also watches the parent process (`parent_pid`) and SIGTERM/SIGINT, and
ends cleanly on `shutdown`, giving in-flight requests a short grace to finish.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any, Callable

import zmq

from . import direct
from .auth import load_key_file, sign_frames, verify_frames
from .endpoints import check_endpoint, ipc_path
from .fair_queue import TIMED_OUT, FairQueue, QueueLimits
from .errors import AuthenticationError, EndpointError, MicrokernelError, ProtocolError, RemoteError
from .mailbox import Mailbox
from .protocol import (DEFAULT_LIMITS, PROTOCOL_VERSION, Limits, Request, _OP_RE, decode_request,
                       encode_error, encode_reply, peek_id)
from .spin import spin_for

log = logging.getLogger("mo_core.microkernel.server")

Handler = Callable[[dict, list], Any]
RawHandler = Callable[..., "bytes | tuple[bytes, Callable[[], None]]"]
BUILTIN_OPS = ("hello", "ping", "shutdown")

_POLL_MS = 200  # how often the loop looks at signals / stop requests
_PARENT_CHECK_S = 0.5
_WANTED_CHECK_S = 5.0  # (still_wanted may read files: a record, /proc; what it finds is rare and not urgent)
_STOP_GRACE_S = 2.0  # in-flight pool requests may finish this long after a stop
_LINGER_MS = 1000  # time to flush the last replies when closing
_TB_LINES = 12


def _short_traceback(exc: BaseException) -> str:
    lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()
    if len(lines) > _TB_LINES:
        lines = ["..."] + lines[-_TB_LINES:]
    return "\n".join(lines)[-4000:]


def _normalize(out: Any, op: str) -> tuple[dict, list]:
    """A handler may return None, a result dict, or (result dict, arrays)."""
    if out is None:
        return {}, []
    if isinstance(out, dict):
        return out, []
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], (dict, type(None))):
        return out[0] or {}, list(out[1] or [])
    raise TypeError(f"handler for '{op}' returned {type(out).__name__}; "
                    f"expected a dict or (dict, arrays)")


class _Lane:
    """One bound ROUTER socket and the verbs it serves."""

    def __init__(self, name: str, ctx: zmq.Context, endpoint: str, limits: Limits):
        self.name = name
        self.handlers: dict[str, tuple[Handler, bool]] = {}
        self.sock = ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.MAXMSGSIZE, limits.max_message_bytes)
        self.sock.setsockopt(zmq.LINGER, _LINGER_MS)
        try:
            self.sock.bind(endpoint)
        except zmq.ZMQError as exc:
            self.sock.close(0)
            raise EndpointError(f"cannot bind {endpoint}: {exc}") from None
        self.endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        # libzmq leaves the socket file behind on close; remember which file is
        # ours so close() removes it but never a newer server's file.
        self._ipc_file = self._own_ipc_file()

    def _own_ipc_file(self) -> tuple[str, int, int] | None:
        path = ipc_path(self.endpoint)
        if not path or path.startswith("@"):
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (path, st.st_dev, st.st_ino)

    def close(self) -> None:
        """Close the socket (from its owning thread) and remove our socket file."""
        self.sock.close(linger=_LINGER_MS)
        if self._ipc_file is not None and self._own_ipc_file() == self._ipc_file:
            try:
                os.unlink(self._ipc_file[0])
            except OSError:
                pass


class _DirectIdent:
    """Stands for the ROUTER identity of a message that came over the direct carrier."""
    bytes = b"direct"


class _DirectPeer:
    """One connection of the Unix carrier (direct.py), shaped like a lane for
    _on_message: replies go back over it, one datagram each."""

    def __init__(self, conn, handlers: dict, server: "Server", pid: int = 0):
        self.conn, self.name, self.handlers = conn, "local", handlers
        self.server = server
        self.pid = pid  # the client process (SO_PEERCRED), for the per-process cap
        self.sock = self  # _send's lane.sock.send_multipart

    def send_multipart(self, parts: list, copy: bool = False) -> None:
        frames = parts[1:]
        if direct.packed_size(frames) > direct.MAX_DATAGRAM:
            # too big for a datagram: the client repeats the request over ZeroMQ
            body = frames[1:] if self.server._key is not None else frames
            rid = peek_id(body, self.server._limits)
            if rid is None:  # (our own encoder made it: cannot happen)
                raise ProtocolError("a reply without a readable id")
            frames = self.server._sign(encode_error(rid, direct.TOO_LARGE, "the reply does not fit a datagram; "
                                                    "send the request over ZeroMQ"))
        self.send(direct.pack(frames))

    def send(self, bufs: list) -> None:
        """One datagram back to the client."""
        try:
            self.conn.sendmsg(bufs)
        except OSError as exc:  # gone, or not reading its replies: dropped (its thread then closes it)
            self.server._log_drop(f"direct carrier: cannot reply: {exc}", _DirectIdent.bytes)
            try:
                self.conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


_carrier_thread = threading.local()  # a handler's word on its own carrier connection's thread


def sleep_after_reply() -> None:
    """Called by a handler on a carrier connection's thread: after this request the
    thread sleeps at once instead of polling for the next one - its work kept every CPU
    busy and left threads spinning there (an OpenMP team), and its client, asleep until
    the reply, needs a CPU to wake up on (the CPU daemon on 2 CPUs, requests back to back,
    the two ways alternating in blocks of 25: 0.4-2.0 % faster a request on MobileNetV2,
    MobileNetV3Small and GoogLeNet, in 5 runs of 5)."""
    _carrier_thread.sleep = True


def spin_deadline(spin: float, start: float, end: float, replied: float | None) -> float:
    """Until when a carrier connection polls for its next request after one that ran
    from `start` to `end` (0.0: it sleeps at once): `spin` seconds after short work (a
    stream of short requests), and after any work that came within `spin` of the
    previous reply (`replied`): a client sending back to back, whose next request is
    as near. A client that pauses between requests gets no spinning thread."""
    if not spin:
        return 0.0
    if end - start < spin or (replied is not None and start - replied < spin):
        return end + spin
    return 0.0


class Server:
    """A ROUTER-socket request server.

    `Server(endpoint, service=..., key=None, threads=0, parent_pid=None, lifeline_fd=None, spin=0)`
    binds at once (so a bad or insecure endpoint fails here). Register verbs with
    `handle(op, fn)`, where `fn(args, arrays)` returns `None`, a result dict or
    `(result, arrays)` and may raise RemoteError for a user error. Then `serve()`.
    `info` (a dict) is added to the `hello` reply.

    The main socket's I/O thread never runs handlers other than the quick
    built-ins and `inline` verbs, so `hello` / `ping` are answered whatever the
    handlers do.

    The local lane: on an ipc endpoint, verbs registered with `lane="local"` are
    served over the local carrier, a Unix seqpacket socket beside the endpoint
    (direct.py: the same messages without ZeroMQ's I/O threads; `hello` gives
    `direct: {path, ops, raw}`), with raw verbs (handle_raw). Each of its
    connections has a thread of its own that receives, runs the handler and
    replies with no hand-off, so a long request holds only its own connection;
    after a request that took less than `spin` seconds, or came less than `spin`
    after the previous reply, it polls for the next one that long before sleeping
    (not while the CPUs are contended: spin.py), so a client's next request skips
    the ~0.1 ms wake-up of a sleeping thread (spin_deadline), unless its handler
    said otherwise (sleep_after_reply). A
    verb a client may also send over ZeroMQ (a message too large for a datagram, a
    client the carrier refused) is registered on the main lane too.
    """

    def __init__(self, endpoint: str, *, service: str = "service", key: bytes | None = None,
                 threads: int = 0, parent_pid: int | None = None, lifeline_fd: int | None = None,
                 limits: Limits = DEFAULT_LIMITS, spin: float = 0.0, queue_limits: QueueLimits = QueueLimits()
                 ) -> None:
        check_endpoint(endpoint, have_key=key is not None)
        if threads < 0:
            raise ValueError("threads must be >= 0")
        self.service = service
        self._key = key
        self._limits = limits
        self._nthreads = threads
        self._spin = spin
        self._idle_hook: tuple[Callable[[], float | None], float] | None = None  # (on_idle)
        self._parent_pid = parent_pid
        # Watch getppid() too: a dead parent that is still a zombie answers kill(0).
        self._parent_is_ppid = parent_pid is not None and os.getppid() == parent_pid
        # a pipe whose other end only the parent holds: readable (end of file) once it is gone; what a
        # sandboxed worker, which sees no other process, follows its parent by
        self._lifeline = lifeline_fd
        self._stop_reason: str | None = None
        self._signalled: int | None = None
        self._inflight = 0
        self._drops = 0
        self._closed = False
        # Own context: closing it (term) is what guarantees the last replies flush.
        self._ctx = zmq.Context()
        try:
            self._main = _Lane("main", self._ctx, endpoint, limits)
        except EndpointError:
            self._ctx.term()
            raise
        self.endpoint = self._main.endpoint
        # the local carrier: its listener (None: none could be made), verbs, raw verbs, connections
        self._direct: direct.Listener | None = None
        self._carrier_handlers: dict[str, tuple[Handler, bool]] | None = None
        self._raw: dict[int, tuple[RawHandler, bool]] = {}  # raw verbs: tag -> (fn, takes fds)
        self._peers: dict[int, tuple[_DirectPeer, threading.Thread]] = {}
        self._peers_lock = threading.Lock()
        self._local_busy = 0  # requests its connection threads are running (under _peers_lock)
        self.direct_messages = 0  # requests that came over the local carrier (a statistic)
        # what the service adds to its hello reply (e.g. whether its framework loaded)
        self.info: dict = {}
        # asked every _WANTED_CHECK_S while serving: a reason to stop (a daemon its record no longer names), or None
        self.still_wanted: Callable[[], str | None] | None = None
        self._replies = Mailbox()
        self._tasks = FairQueue(queue_limits)  # the pool's work: per client, in turn (fair_queue.py)
        self._pool: list[threading.Thread] = []
        for op, fn in (("hello", self._hello), ("ping", self._ping), ("shutdown", self._shutdown)):
            self._main.handlers[op] = (fn, True)

    # ----------------------------------------------------------------- public API
    def handle(self, op: str, fn: Handler, *, inline: bool = False, lane: str = "main") -> None:
        """Register `fn(args, arrays)` for verb `op` (before serve()). inline=True runs
        it in the I/O thread even with a pool: only for quick, non-blocking verbs.
        lane="local" serves it on the local carrier instead (see the class doc); the
        same verb may have a handler on each lane."""
        if not _OP_RE.match(op):
            raise ValueError(f"bad verb name {op!r}")
        if op in BUILTIN_OPS:
            raise ValueError(f"'{op}' is a built-in verb")
        if lane == "main":
            self._main.handlers[op] = (fn, inline)
        elif lane == "local":
            self._carrier()[op] = (fn, True)
        else:
            raise ValueError(f"unknown lane {lane!r} (main or local)")

    def handle_raw(self, tag: int, fn: RawHandler, *, fds: bool = False) -> None:
        """Register a raw verb of the local carrier (direct.py; before serve()):
        `fn(payload)` runs on the connection's thread and returns the reply's payload
        (bytes, at most direct.MAX_RAW_PAYLOAD), or (payload, then): `then()` runs on
        that thread after the reply went out (work the client need not wait for, done
        before the connection's next request); an exception is a RAW_FAILED reply
        with its message. Served only without a key and only where the carrier is
        (hello lists the tags as direct.raw); a client without it sends the verb's
        framed equivalent instead. fds=True: `fn(payload, fds)` also gets the
        descriptors the request carried, and must close them."""
        if isinstance(tag, bool) or not isinstance(tag, int) or not 0 <= tag < 1 << 31:
            raise ValueError(f"bad raw verb tag {tag!r}")
        self._carrier()
        self._raw[tag] = (fn, fds)

    def request_stop(self, reason: str = "stop requested") -> None:
        """Ask serve() to return (thread-safe; takes effect within ~0.2 s)."""
        if self._stop_reason is None:
            self._stop_reason = reason

    def serve(self) -> str:
        """Run the request loop until shutdown, a signal, parent death or
        request_stop(); then close. Returns the reason it stopped."""
        if self._closed:
            raise MicrokernelError("server is closed")
        restore = self._install_signal_handlers()
        for i in range(self._nthreads):
            t = threading.Thread(target=self._pool_loop, name=f"{self.service}-pool-{i}",
                                 daemon=True)
            t.start()
            self._pool.append(t)
        sock = self._main.sock
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(self._replies.fileno(), zmq.POLLIN)
        listener = self._direct
        if listener is not None:
            poller.register(listener.fileno(), zmq.POLLIN)
        next_parent_check = 0.0
        next_wanted_check = time.monotonic() + _WANTED_CHECK_S
        stop_deadline = None
        try:
            while True:
                if self._signalled is not None:
                    self.request_stop(f"signal {signal.Signals(self._signalled).name}")
                now = time.monotonic()
                if now >= next_parent_check:
                    next_parent_check = now + _PARENT_CHECK_S
                    if self._parent_gone():
                        log.info("parent process %s is gone; exiting", self._parent_pid)
                        self.request_stop("parent died")
                        stop_deadline = now  # nobody is left to answer
                    elif self.still_wanted is not None and self._stop_reason is None and now >= next_wanted_check:
                        next_wanted_check = now + _WANTED_CHECK_S
                        unwanted = self.still_wanted()
                        if unwanted:
                            log.warning("%s; exiting", unwanted)
                            self.request_stop(unwanted)
                if self._stop_reason is not None:
                    if stop_deadline is None:
                        stop_deadline = now + _STOP_GRACE_S
                    if (self._inflight == 0 and self._local_busy == 0) or now >= stop_deadline:
                        break
                events = dict(poller.poll(_POLL_MS))
                if self._replies.fileno() in events:
                    self._flush_replies()
                if sock in events and self._stop_reason is None:
                    self._receive_batch(self._main)
                if listener is not None and listener.fileno() in events and self._stop_reason is None:
                    self._accept(listener)
            return self._stop_reason or "stopped"
        finally:
            restore()
            self.close()

    def close(self) -> None:
        """Release the sockets, the pool and the context (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._tasks.stop(len(self._pool))
        deadline = time.monotonic() + 1.0
        for t in self._pool:  # a handler still busy is left behind (daemon thread)
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        self._replies.close()
        self._main.close()
        self._close_carrier(deadline)
        self._ctx.term()  # returns once queued replies are sent or linger expired

    # ----------------------------------------------------------------- built-ins
    def _hello(self, args: dict, arrays: list) -> dict:
        info = dict(self.info)
        info.update({"service": self.service, "version": PROTOCOL_VERSION, "pid": os.getpid(),
                     "ops": sorted(self._main.handlers)})
        if self._direct is not None:
            info["direct"] = {"path": self._direct.path, "ops": sorted(self._carrier_handlers)}
            if self._raw and self._key is None:
                info["direct"]["raw"] = sorted(self._raw)
        return info

    def _ping(self, args: dict, arrays: list) -> dict:
        return {"pid": os.getpid(), "inflight": self._inflight}

    def _shutdown(self, args: dict, arrays: list) -> dict:
        self.request_stop("shutdown requested")
        return {"pid": os.getpid()}

    # ----------------------------------------------------------------- internals
    def _carrier(self) -> dict:
        """The verbs of the local carrier (made with its listener on first use)."""
        if self._carrier_handlers is None:
            if self._closed:
                raise MicrokernelError("register local verbs before serve()")
            self._carrier_handlers = {"ping": (self._ping, True)}
            self._direct = self._direct_listener(self.endpoint)
        return self._carrier_handlers

    @staticmethod
    def _direct_listener(endpoint: str) -> direct.Listener | None:
        path = ipc_path(endpoint)
        if not path or path.startswith("@"):
            return None
        where = direct.path_for(path)
        if where is None:
            return None
        try:
            return direct.Listener(where)
        except OSError as exc:  # the ZeroMQ sockets serve alone
            log.warning("no local carrier at %s: %s", where, exc)
            return None

    # ----------------------------------------------------------------- the local carrier
    def _accept(self, listener: direct.Listener) -> None:
        """Take the waiting connections, each with a thread of its own (I/O thread),
        unless the server has MAX_CONNECTIONS or the connecting process MAX_PER_PEER
        already: then it is closed at once, before anything is read, and the client
        sends over ZeroMQ instead (issue 21, F5: 300 idle connections of one process
        made every other client's requests fail). A worker's parent is not capped per
        process: it is the one client, and each of its threads that calls has a
        connection (a daemon's, one per client connection of its own)."""
        while True:
            conn = listener.accept()
            if conn is None:
                return
            try:
                pid = direct.peer_credentials(conn)[0]
            except OSError:
                pid = 0
            with self._peers_lock:
                if len(self._peers) >= direct.MAX_CONNECTIONS or self._closed or (not self._is_parent(pid) and sum(
                        1 for p, _ in self._peers.values() if p.pid == pid) >= direct.MAX_PER_PEER):
                    conn.close()
                    continue
                peer = _DirectPeer(conn, self._carrier_handlers, self, pid)
                thread = threading.Thread(target=self._serve_peer, args=(peer,), daemon=True,
                                          name=f"{self.service}-local-{conn.fileno()}")
                self._peers[conn.fileno()] = (peer, thread)
            thread.start()

    def _is_parent(self, pid: int) -> bool:
        """Is the process `pid` (SO_PEERCRED) the parent this server follows? A
        sandboxed worker (one with a lifeline) sees no process outside its pid
        namespace: its parent's pid reads 0 there."""
        return pid == (0 if self._lifeline is not None else self._parent_pid)

    def on_idle(self, hook: Callable[[], float | None], after: float) -> None:
        """Call `hook()` on a carrier connection's thread, or a pool thread, once it has waited
        `after` seconds for a request since its last reply, and again after as many seconds as the hook
        returns while the pause lasts (None: not before the next request; an exception is
        logged and counts as None). The CPU daemon frees an idle connection's OpenMP team
        there (cpu/teams.py)."""
        self._idle_hook = (hook, after)

    def _serve_peer(self, peer: _DirectPeer) -> None:
        """A connection's thread: receive, run, reply, until the peer or the server ends."""
        conn = peer.conn
        fd = conn.fileno()
        spin_until = 0.0
        replied = None  # when the previous reply went out
        idle_at = None  # when the idle hook is due (on_idle)
        try:
            while not self._closed and self._stop_reason is None:
                got = self._next_datagram(conn, spin_until, None if idle_at is None else idle_at - time.perf_counter())
                if got is None:
                    if idle_at is not None and time.perf_counter() >= idle_at:
                        idle_at = self._idle_due(self._run_idle_hook())
                    continue
                data, fds = got
                if not data:
                    direct.close_all(fds)
                    return  # the client closed it
                start = time.perf_counter()
                with self._peers_lock:
                    self._local_busy += 1
                try:
                    self.direct_messages += 1
                    if direct.is_raw(data):
                        self._on_raw(peer, data, fds)
                    else:
                        direct.close_all(fds)
                        self._on_message(peer, [_DirectIdent, *direct.unpack(data, self._limits)])
                finally:
                    with self._peers_lock:
                        self._local_busy -= 1
                end = time.perf_counter()
                if getattr(_carrier_thread, "sleep", False):
                    _carrier_thread.sleep, spin_until = False, 0.0
                else:
                    spin_until = spin_deadline(spin_for(self._spin), start, end, replied)
                replied = end
                idle_at = self._idle_due(self._idle_hook and self._idle_hook[1])
        except (OSError, ProtocolError) as exc:  # a reply it does not read, a malformed datagram
            self._log_drop(f"direct carrier: {exc}", _DirectIdent.bytes)
        except Exception:  # a bug here must not take the service down
            log.exception("unexpected error on the local carrier")
        finally:
            with self._peers_lock:
                self._peers.pop(fd, None)
            conn.close()

    def _idle_due(self, delay: float | None) -> float | None:
        """When a request thread's idle hook is next due: `delay` s from now (None: no
        hook, or it asked for no other look before the next request)."""
        if self._idle_hook is None or delay is None:
            return None
        return time.perf_counter() + delay

    def _run_idle_hook(self) -> float | None:
        try:
            return self._idle_hook[0]()
        except Exception:  # a bug there must not cost the connection
            log.exception("the idle hook failed")
            return None

    @staticmethod
    def _next_datagram(conn, spin_until: float, wait: float | None = None):
        """The next datagram and the descriptors it carried (b"" when the peer
        closed), polled for until `spin_until`, then waited for up to _POLL_MS, or
        `wait` seconds where that is less (None: nothing came)."""
        while time.perf_counter() < spin_until:
            try:
                return direct.receive_with_fds(conn, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                pass
        conn.settimeout(_POLL_MS / 1000 if wait is None else max(1e-4, min(wait, _POLL_MS / 1000)))
        try:
            return direct.receive_with_fds(conn)
        except (socket.timeout, BlockingIOError, InterruptedError):
            return None
        finally:
            conn.settimeout(0.0)  # replies are sent without blocking: one not read is dropped

    def _close_carrier(self, deadline: float) -> None:
        if self._direct is not None:
            self._direct.close()
        with self._peers_lock:
            peers = list(self._peers.values())
        for peer, thread in peers:  # they see _closed within _POLL_MS (a handler still busy is left behind)
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                with contextlib.suppress(OSError):
                    peer.conn.shutdown(socket.SHUT_RDWR)

    def _on_raw(self, peer: _DirectPeer, data, fds: list) -> None:
        """Run a raw verb and reply (ProtocolError for a malformed datagram). The
        descriptors go to a verb that takes them, else are closed."""
        try:
            tag, rid, payload = direct.unpack_raw(data)
        except ProtocolError:
            direct.close_all(fds)
            raise
        fn, takes_fds = self._raw.get(tag, (None, False)) if self._key is None else (None, False)
        if not takes_fds:
            direct.close_all(fds)
        then = None
        if fn is None:
            word, body = direct.RAW_UNKNOWN, b""
        else:
            try:
                body = fn(payload, fds) if takes_fds else fn(payload)
                if type(body) is tuple:
                    body, then = body
                if not isinstance(body, (bytes, bytearray)) or len(body) > direct.MAX_RAW_PAYLOAD:
                    raise TypeError(f"raw verb {tag} returned {type(body).__name__} of "
                                    f"{len(body) if isinstance(body, (bytes, bytearray)) else '?'} bytes")
                word = direct.RAW_OK
            except BaseException as exc:  # noqa: BLE001 - the client gets the message (SystemExit from user code too)
                log.warning("raw verb %d failed: %s", tag, _short_traceback(exc))
                word, body = direct.RAW_FAILED, f"{type(exc).__name__}: {exc}".encode()[:direct.MAX_RAW_PAYLOAD]
        try:
            peer.send(direct.pack_raw(word, rid, body))
        finally:
            if then is not None:
                try:
                    then()
                except Exception:  # noqa: BLE001 - the reply is out; a bug here must not end the connection
                    log.exception("raw verb %d: its work after the reply failed", tag)

    def _install_signal_handlers(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        def on_signal(signum, frame):  # only sets a flag: the loop does the rest
            self._signalled = signum
        old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        def restore() -> None:
            for s, h in old.items():
                signal.signal(s, h)
        return restore

    def _parent_gone(self) -> bool:
        if self._lifeline is not None:
            import select
            try:
                return bool(select.select([self._lifeline], [], [], 0)[0])
            except (OSError, ValueError):
                return True
        pid = self._parent_pid
        if pid is None:
            return False
        if self._parent_is_ppid and os.getppid() != pid:
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # exists (owned by someone else)
        return False

    def _log_drop(self, why: str, ident: bytes) -> None:
        self._drops += 1  # rate-limited so a flood cannot fill the disk
        if self._drops <= 20 or self._drops % 1000 == 0:
            log.warning("dropped a message from peer %s (%d dropped so far): %s",
                        ident.hex(), self._drops, why)

    def _sign(self, frames: list) -> list:
        return sign_frames(self._key, frames) if self._key is not None else frames

    def _send(self, lane: _Lane, ident: bytes, frames: list) -> None:
        try:
            lane.sock.send_multipart([ident, *frames], copy=False)
        except zmq.ZMQError as exc:  # peer gone; ROUTER drops silently anyway
            log.warning("could not send a reply to peer %s: %s", ident.hex(), exc)

    def _receive_batch(self, lane: _Lane) -> None:
        for _ in range(256):  # bounded, so replies from the pool still get out
            try:
                parts = lane.sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            try:
                self._on_message(lane, parts)
            except Exception:  # a bug here must not take the service down
                log.exception("unexpected error while handling a message")

    def _on_message(self, lane: _Lane, parts: list) -> None:
        ident = parts[0].bytes
        frames = parts[1:]
        if not frames:
            self._log_drop("empty message", ident)
            return
        if self._key is not None:
            try:
                frames = verify_frames(self._key, frames)
            except AuthenticationError as exc:
                self._log_drop(str(exc), ident)  # no reply to unauthenticated peers
                return
        try:
            req = decode_request(frames, self._limits)
        except ProtocolError as exc:
            rid = peek_id(frames, self._limits)
            if rid is None:
                self._log_drop(f"malformed and no request id: {exc}", ident)
            else:
                self._send(lane, ident, self._sign(encode_error(rid, "protocol", str(exc))))
            return
        entry = lane.handlers.get(req.op)
        if entry is None:
            known = ", ".join(sorted(lane.handlers))
            where = "" if lane is self._main else f"'s {lane.name} lane"
            self._send(lane, ident, self._sign(encode_error(
                req.id, "unknown_op", f"{self.service}{where} has no verb '{req.op}' (it has: {known})")))
            return
        fn, inline = entry
        if inline or self._nthreads == 0 or lane is not self._main:
            self._send(lane, ident, self._run(fn, req))
        else:
            refused = self._tasks.put(ident, (ident, fn, req), sum(len(p) for p in parts))
            if refused is None:
                self._inflight += 1
            else:
                self._send(lane, ident, self._sign(encode_error(
                    req.id, "busy", f"{self.service} refused '{req.op}': {refused}; wait for replies before "
                                    "sending more")))

    def _flush_replies(self) -> None:
        for ident, frames in self._replies.drain():
            self._inflight -= 1
            self._send(self._main, ident, frames)

    def _pool_loop(self) -> None:
        idle_at = None  # when the idle hook is due (on_idle)
        while True:
            item = self._tasks.get(None if idle_at is None else max(0.0, idle_at - time.perf_counter()))
            if item is TIMED_OUT:
                idle_at = self._idle_due(self._run_idle_hook())
                continue
            if item is None:
                return
            ident, fn, req = item
            self._replies.put((ident, self._run(fn, req)))
            idle_at = self._idle_due(self._idle_hook and self._idle_hook[1])

    def _run(self, fn: Handler, req: Request) -> list:
        """Call a handler and build its (signed) reply; never raises."""
        try:
            result, arrays = _normalize(fn(req.args, req.arrays), req.op)
            frames = encode_reply(req.id, result, arrays, self._limits)
        except RemoteError as exc:
            frames = encode_error(req.id, exc.kind, exc.message, exc.faq, exc.traceback)
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt / SystemExit raised by user
            # code (a custom kernel's import) must cost one error reply, never a pool thread
            log.error("handler for '%s' raised %s: %s", req.op, type(exc).__name__, exc)
            frames = encode_error(req.id, "internal", f"{type(exc).__name__}: {exc}",
                                  traceback=_short_traceback(exc))
        return self._sign(frames)


def serve_main(argv: list[str] | None, service_name: str,
               setup_fn: Callable[[Server, argparse.Namespace], Callable[[str], None] | None], *,
               add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
               before_bind: Callable[[argparse.Namespace], None] | None = None,
               threads: int = 1, parent_pid: int | None = None, spin: float = 0.0,
               timestamps: bool = False, description: str | None = None) -> int:
    """Command-line entry of a worker or daemon: parse options, bind, register, serve.

    A worker's whole `__main__` is:
        if __name__ == "__main__":
            sys.exit(serve_main(sys.argv[1:], "caffe", register_verbs))

    Standard options: --endpoint (required), --parent-pid (exit when that process
    dies; default `parent_pid`, None/0: long-lived), --key-file, --threads (default
    `threads`), --log-level. The service adds its own with `add_arguments(parser)`;
    `before_bind(opts)` runs before the endpoint is bound (e.g. refuse to start
    twice); `setup_fn(server, opts)` registers verbs and may return a callable that
    runs once serving ends, with the reason it ended (e.g. removing a record). A ValueError or
    MicrokernelError from parsing, before_bind or binding is one `[ ERROR ]` line
    and exit status 1; the stop reason is logged at the end.
    """
    parser = argparse.ArgumentParser(prog=f"python -m ... ({service_name})",
                                     description=description or f"mo-core {service_name} service")
    parser.add_argument("--endpoint", required=True, help="ipc://PATH or tcp://HOST:PORT to bind")
    parser.add_argument("--parent-pid", type=int, default=parent_pid,
                        help="exit when this process dies (0: long-lived)")
    parser.add_argument("--lifeline-fd", type=int, default=None,
                        help="exit when this inherited pipe reaches its end (the parent closed it, or died)")
    parser.add_argument("--key-file", default=None, help="HMAC key file (mode 0600)")
    parser.add_argument("--threads", type=int, default=threads,
                        help="handler threads (0 = run handlers in the I/O thread)")
    parser.add_argument("--log-level", default="WARNING")
    if add_arguments is not None:
        add_arguments(parser)
    opts = parser.parse_args(argv)
    stamp = "%(asctime)s " if timestamps else ""
    logging.basicConfig(stream=sys.stderr, level=opts.log_level.upper(),
                        format=f"{stamp}[ {service_name} %(levelname)s ] %(message)s")
    if opts.key_file:
        opts.key_file = os.path.abspath(opts.key_file)
    try:
        if opts.threads < 0:
            raise ValueError("--threads must be >= 0")
        key = load_key_file(opts.key_file) if opts.key_file else None
        if before_bind is not None:
            before_bind(opts)
        server = Server(opts.endpoint, service=service_name, key=key, threads=opts.threads,
                        parent_pid=opts.parent_pid or None, lifeline_fd=opts.lifeline_fd, spin=spin)
    except (MicrokernelError, ValueError) as exc:
        prefix = time.strftime("%Y-%m-%d %H:%M:%S ") if timestamps else ""
        print(f"{prefix}[ ERROR ] {service_name}: {exc}", file=sys.stderr, flush=True)
        return 1
    reason = "failed"
    cleanup = None
    try:
        cleanup = setup_fn(server, opts)
        log.info("pid %d serving at %s", os.getpid(), server.endpoint)
        reason = server.serve()
    finally:
        server.close()
        if cleanup is not None:
            cleanup(reason)
        log.info("stopped: %s", reason)
    return 0
