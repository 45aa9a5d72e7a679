"""The calling side: a thread-safe request/reply client over DEALER sockets.

Two ways to make a call, with the same replies and errors:

* through the client's I/O thread (`call_async` -> PendingCall, and `call`):
  callers (any number of threads) encode and sign their request in their own
  thread, register a PendingCall under a fresh request id, and post the frames to
  the I/O thread through a Mailbox. The I/O thread (started on the first such
  call) owns one DEALER socket, sends, receives, decodes and verifies replies,
  and completes the PendingCall with the matching id;
* on the calling thread (`call(..., direct=True, spin=S)`): each thread gets a
  DEALER socket of its own, sends and receives there, polling for the reply for
  `spin` seconds before sleeping (not while the CPUs are contended: spin.py). It saves the two thread hand-offs of the I/O
  thread (~0.1 ms each on a small VM), which matters for requests that take well
  under a millisecond; the price is one more connection per calling thread. Given
  the server's `direct_path` (its hello's direct.path: the local carrier), such a
  call goes over that Unix socket instead of ZeroMQ (direct.py: no I/O threads on
  either side), falling back to ZeroMQ for a message too large for a datagram, or
  for good when the socket cannot be connected.

Replies whose id is unknown (never sent, or already timed out / cancelled) are
discarded, so a late reply can never be mistaken for the answer to another
request. A waiting caller may `watch` the serving process (anything with an
`alive()` method, e.g. a launcher.Process): when it ends, the call fails at once
with ServiceGone instead of waiting for its timeout.
"""
from __future__ import annotations

import itertools
import os
import logging
import socket
import struct
import threading
import time
import weakref
from typing import Any, Protocol, Sequence

import numpy as np
import zmq

from . import direct as _carrier
from .auth import sign_frames, verify_frames
from .endpoints import check_endpoint
from .errors import (AuthenticationError, MicrokernelError, MicrokernelTimeout, ProtocolError,
                     RemoteError, ServiceGone)
from .mailbox import Mailbox
from .protocol import DEFAULT_LIMITS, Limits, Reply, decode_reply, encode_request, peek_id
from .spin import spin_for

log = logging.getLogger("mo_core.microkernel.client")

TICK = 0.1  # how often a waiting caller looks at the watched process
REFUSAL_GRACE = 0.5  # s a watched process whose new connection broke has to show its end before that is a refusal
_TIMEVAL = struct.Struct("@ll")  # struct timeval (SO_RCVTIMEO)


class Watched(Protocol):
    def alive(self) -> bool: ...


class PendingCall:
    """The future of one request (from Client.call_async)."""

    def __init__(self, core: "_Core", req_id: int, op: str) -> None:
        self._core = core
        self.id = req_id
        self.op = op
        self._event = threading.Event()
        self._reply: Reply | None = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the reply (or a failure) is in, at most `timeout` s (None:
        forever). True when done."""
        return self._event.wait(timeout)

    def result(self, timeout: float | None = None, *, watch: Watched | None = None) -> tuple[dict, list]:
        """(result, arrays) of the reply. Waits at most `timeout` s (default: the
        client's timeout), then raises MicrokernelTimeout and forgets the request;
        ServiceGone as soon as `watch` is no longer alive. An error reply raises
        RemoteError."""
        t = self._core.timeout if timeout is None else timeout
        deadline = time.monotonic() + t
        while not self._event.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                self.cancel()
                if not self._event.is_set():
                    raise MicrokernelTimeout(
                        f"no reply to '{self.op}' from {self._core.endpoint} within {t:g} s "
                        f"(request {self.id})")
                break
            if self._event.wait(left if watch is None else min(TICK, left)):
                break
            if watch is not None and not watch.alive() and not self._event.wait(0.05):
                self.cancel()  # (and a reply sent just before the end was waited for)
                raise ServiceGone(f"the process serving {self._core.endpoint} ended during '{self.op}'")
        if self._error is not None:
            raise self._error
        assert self._reply is not None
        return self._reply.unwrap()

    def cancel(self) -> None:
        """Stop waiting: a reply that still arrives is discarded."""
        self._core.forget(self.id)

    def _complete(self, reply: Reply | None = None, error: BaseException | None = None) -> None:
        self._reply, self._error = reply, error
        self._event.set()


def _new_dealer(endpoint: str, limits: Limits) -> zmq.Socket:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, limits.max_message_bytes)
    try:
        sock.connect(endpoint)
    except zmq.ZMQError as exc:
        sock.close(0)
        raise MicrokernelError(f"cannot connect to {endpoint}: {exc}") from None
    return sock


class _Direct:
    """One calling thread's own socket (see the module doc). Only that thread
    touches it; it is closed with the thread (its thread-local is collected) or
    by that thread once the client is closed."""

    def __init__(self, endpoint: str, limits: Limits):
        self.sock = _new_dealer(endpoint, limits)
        self.ids = itertools.count(1)
        self.rcvtimeo = -1

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close(0)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class _Refused(Exception):
    """The direct carrier closed a new connection unanswered (the caller falls back to ZeroMQ)."""


class _Unix:
    """One calling thread's connection to the server's direct carrier (direct.py).

    Raw calls wait for their reply in one blocking receive that the kernel ends after
    a TICK (SO_RCVTIMEO) - one system call that sleeps, where Python's own timeouts
    poll first and then receive; framed calls use Python's timeouts. Which of the two
    the socket is set for is remembered, so that a stream of raw calls sets nothing."""

    def __init__(self, path: str):
        self.sock = _carrier.connect(path)
        self.ids = itertools.count(1)
        self.answered = False  # a reply came over it (else a reset means the server refused it: direct.py)
        self.blocking = True  # as connect() made it; False once Python's timeouts are set
        self.rcvtimeo = 0.0  # SO_RCVTIMEO set on it (0: none)

    def wait_blocking(self, seconds: float) -> None:
        """Blocking receives that give up after `seconds` (at least 1 ms)."""
        if not self.blocking:
            self.sock.settimeout(None)
            self.blocking = True
        if seconds != self.rcvtimeo:
            whole = int(seconds)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                                 _TIMEVAL.pack(whole, max(1000, int((seconds - whole) * 1e6))))
            self.rcvtimeo = seconds

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class _Core:
    """State shared by the Client facade and its I/O thread (kept separate so a
    forgotten Client can be garbage-collected and its finalizer stop the thread)."""

    def __init__(self, endpoint: str, timeout: float, key: bytes | None, limits: Limits,
                 direct_path: str | None = None):
        self.endpoint = endpoint
        self.direct_path = direct_path  # None: ZeroMQ only (never given, or it could not be connected)
        self.timeout = timeout
        self.key = key
        self.limits = limits
        self.lock = threading.Lock()
        self.pending: dict[int, PendingCall] = {}
        self.ids = itertools.count(1)
        self.outbox = Mailbox()
        self.closing = False
        self.local = threading.local()  # the calling threads' _Direct sockets
        try:
            self.sock = _new_dealer(endpoint, limits)
        except MicrokernelError:
            self.outbox.close()
            raise
        self.thread: threading.Thread | None = None

    def start_io(self) -> None:
        """Start the I/O thread (once). The socket is handed over to it here and never
        touched again by another thread (thread start is a full memory barrier, as
        zmq requires)."""
        with self.lock:
            if self.thread is None and not self.closing:
                self.thread = threading.Thread(target=self.io_loop, daemon=True,
                                               name=f"mk-client {self.endpoint}")
                self.thread.start()

    def forget(self, req_id: int) -> PendingCall | None:
        with self.lock:
            return self.pending.pop(req_id, None)

    def io_loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self.outbox.fileno(), zmq.POLLIN)
        try:
            while not self.closing:
                events = dict(poller.poll())
                if self.outbox.fileno() in events:
                    for item in self.outbox.drain():
                        if item is not None:
                            self.send(*item)
                if self.sock in events:
                    for _ in range(256):
                        try:
                            frames = self.sock.recv_multipart(zmq.NOBLOCK, copy=False)
                        except zmq.Again:
                            break
                        try:
                            self.on_reply(frames)
                        except Exception:  # keep serving the other callers
                            log.exception("unexpected error while handling a reply")
        except Exception:  # never leave callers hanging silently
            log.exception("client I/O thread for %s failed", self.endpoint)
        finally:
            self.sock.close(0)
            with self.lock:
                pending, self.pending = self.pending, {}
            for call in pending.values():
                call._complete(error=MicrokernelError(f"client for {self.endpoint} was closed"))

    def send(self, req_id: int, frames: list) -> None:
        try:
            self.sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
        except zmq.ZMQError as exc:  # zmq.Again: the peer's queue is full
            call = self.forget(req_id)
            if call is not None:
                call._complete(error=MicrokernelError(
                    f"cannot send '{call.op}' to {self.endpoint}: {exc}"))

    def open_reply(self, frames: list) -> tuple[int | None, Reply | ProtocolError | None]:
        """(request id, decoded reply or the ProtocolError of a malformed one) of
        received frames; (None, None) for a message to drop (a bad signature, or
        malformed beyond recovering its id)."""
        if self.key is not None:
            try:
                frames = verify_frames(self.key, frames)
            except AuthenticationError as exc:
                log.warning("dropped a reply from %s: %s", self.endpoint, exc)
                return None, None
        try:
            reply = decode_reply(frames, self.limits)
        except ProtocolError as exc:
            rid = peek_id(frames, self.limits)
            if rid is None:
                log.warning("dropped a malformed reply from %s: %s", self.endpoint, exc)
                return None, None
            return rid, ProtocolError(f"malformed reply from {self.endpoint}: {exc}")
        return reply.id, reply

    def on_reply(self, frames: list) -> None:
        rid, reply = self.open_reply(frames)
        call = self.forget(rid) if rid is not None else None
        if call is None:
            if rid is not None:
                log.debug("discarded a reply with unknown or stale id %d", rid)
            return
        if isinstance(reply, ProtocolError):
            call._complete(error=reply)
        else:
            call._complete(reply=reply)

    def encode(self, req_id: int, op: str, args: dict | None, arrays) -> list:
        frames = encode_request(req_id, op, args, arrays, self.limits)
        return sign_frames(self.key, frames) if self.key is not None else frames

    def direct(self) -> _Direct:
        """The calling thread's own socket (made on first use)."""
        chan = getattr(self.local, "chan", None)
        if chan is None:
            chan = self.local.chan = _Direct(self.endpoint, self.limits)
        return chan

    def unix(self) -> _Unix | None:
        """The calling thread's direct-carrier connection (made on first use); None
        when there is none to use."""
        chan = getattr(self.local, "unix", None)
        if chan is None and self.direct_path is not None:
            try:
                chan = self.local.unix = _Unix(self.direct_path)
            except OSError as exc:
                log.debug("direct carrier %s unusable (%s): ZeroMQ only", self.direct_path, exc)
                self.direct_path = None
        return chan

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        for attr in ("chan", "unix"):
            chan = getattr(self.local, attr, None)
            if chan is not None:  # the closing thread's own; the others close theirs
                chan.close()
                setattr(self.local, attr, None)
        with self.lock:
            thread = self.thread
        if thread is None:
            self.sock.close(0)
        else:
            self.outbox.put(None)  # wake the I/O thread
            if threading.current_thread() is not thread:
                thread.join(timeout=5.0)
        self.outbox.close()


def _ends_within(watch: Watched, seconds: float) -> bool:
    """Does the watched process show its end within `seconds`? A process that dies closes
    its sockets before its parent can see it gone - longer still inside a sandbox, whose
    own process outlives it by a moment - so a connection it broke is only a refusal
    (after which the request would be sent again, and run twice) once it stays alive."""
    end = time.monotonic() + seconds
    while watch.alive():
        if time.monotonic() >= end:
            return False
        time.sleep(0.005)
    return True


def _await_reply(core: _Core, op: str, req_id: int, deadline: float, timeout: float, watch: Watched | None,
                 spin: float, try_receive, receive_within, open_reply=None):
    """The reply to request `req_id` on a calling thread's own connection: polls
    `try_receive()` for `spin` s (spin.py), then waits `receive_within(seconds)` a
    TICK at a time while `watch` lives, until `deadline`; both return what was
    received or None, which `open_reply` (default: core.open_reply, for frames)
    turns into (request id, reply). Replies to other (timed-out) requests are dropped."""
    open_reply = open_reply or core.open_reply
    early = None
    spin = spin_for(spin)
    if spin:
        until = time.perf_counter() + spin
        while early is None and time.perf_counter() < until:
            early = try_receive()
    while True:
        if early is not None:
            received, early = early, None
        else:
            left = deadline - time.monotonic()
            received = receive_within(max(0.001, min(TICK if watch is not None else left, left)))
        if received is not None:
            rid, reply = open_reply(received)
            if rid != req_id:
                continue  # dropped, or a late reply to a request that timed out
            if isinstance(reply, ProtocolError):
                raise reply
            return reply
        if watch is not None and not watch.alive():
            raise ServiceGone(f"the process serving {core.endpoint} ended during '{op}'")
        if time.monotonic() >= deadline:
            raise MicrokernelTimeout(f"no reply to '{op}' from {core.endpoint} within "
                                     f"{timeout:g} s (request {req_id})")


class Client:
    """`Client(endpoint, timeout=30.0, key=None)`: call verbs of a Server.

    Thread-safe: any number of threads may `call` at once; each gets its own reply.
    """

    def __init__(self, endpoint: str, *, timeout: float = 30.0, key: bytes | None = None,
                 limits: Limits = DEFAULT_LIMITS, direct_path: str | None = None) -> None:
        check_endpoint(endpoint, have_key=key is not None)
        if direct_path is not None and (not isinstance(direct_path, str) or not os.path.isabs(direct_path)):
            direct_path = None  # (it comes from the server's hello)
        self._core = _Core(endpoint, timeout, key, limits, direct_path)
        self._finalizer = weakref.finalize(self, self._core.close)

    @property
    def endpoint(self) -> str:
        return self._core.endpoint

    @property
    def timeout(self) -> float:
        return self._core.timeout

    @property
    def closed(self) -> bool:
        return self._core.closing

    @property
    def direct_usable(self) -> bool:
        """Has it a direct carrier to call over (given, and not found unconnectable)?"""
        return self._core.direct_path is not None

    def call_async(self, op: str, args: dict | None = None,
                   arrays: Sequence[np.ndarray] | None = None) -> PendingCall:
        """Send a request now (through the I/O thread); returns its PendingCall.
        Arrays are sent zero-copy: do not modify them until the call is done."""
        core = self._core
        if core.closing:
            raise MicrokernelError(f"client for {core.endpoint} is closed")
        if core.thread is None:
            core.start_io()
        with core.lock:
            req_id = next(core.ids)
        frames = core.encode(req_id, op, args, arrays)
        call = PendingCall(core, req_id, op)
        with core.lock:
            core.pending[req_id] = call
        if not core.outbox.put((req_id, frames)):
            core.forget(req_id)
            raise MicrokernelError(f"client for {core.endpoint} is closed")
        return call

    def call(self, op: str, args: dict | None = None, arrays: Sequence[np.ndarray] | None = None,
             timeout: float | None = None, *, watch: Watched | None = None, direct: bool = False,
             spin: float = 0.0) -> tuple[dict, list]:
        """Request/reply: (result, arrays). Raises RemoteError for an error reply,
        MicrokernelTimeout when no reply comes within `timeout` (default: the
        client's), ServiceGone when `watch` ends first. `direct=True` sends and
        receives on the calling thread (polling `spin` s before sleeping)."""
        if not direct:
            return self.call_async(op, args, arrays).result(timeout, watch=watch)
        timeout = self.timeout if timeout is None else timeout
        if self._core.direct_path is not None:
            done = self._call_unix(op, args, arrays, timeout, watch, spin)
            if done is not None:
                return done
        return self._call_direct(op, args, arrays, timeout, watch, spin)

    def _call_unix(self, op: str, args, arrays, timeout: float, watch: Watched | None,
                   spin: float) -> tuple[dict, list] | None:
        """_call_direct over the direct carrier; None: send it over ZeroMQ instead (no
        carrier, a request too large for a datagram, or a reply that was)."""
        core = self._core
        if core.closing:
            raise MicrokernelError(f"client for {core.endpoint} is closed")
        chan = core.unix()
        if chan is None:
            return None
        req_id = next(chan.ids)
        frames = core.encode(req_id, op, args, arrays)
        if _carrier.packed_size(frames) > _carrier.MAX_DATAGRAM:
            return None

        def open_frames(data):
            if _carrier.is_raw(data):
                return None, None  # a late reply to a raw call of this thread
            return core.open_reply(_carrier.unpack(data, core.limits))
        try:
            reply = self._unix_exchange(chan, op, _carrier.pack(frames), req_id, timeout, watch, spin, open_frames)
        except _Refused:
            return None
        if not reply.ok and reply.error is not None and reply.error.kind == _carrier.TOO_LARGE:
            return None
        return reply.unwrap()

    def call_raw(self, tag: int, payload: bytes, timeout: float | None = None, *, watch: Watched | None = None,
                 spin: float = 0.0, fds=()) -> bytes | None:
        """A raw verb of the server (Server.handle_raw, direct.py) on the calling
        thread's direct-carrier connection: the reply's payload; None when there is
        no direct carrier to use (send the verb's framed equivalent then). Raises
        RemoteError (kind "raw_failed": the handler failed; "raw_unknown": no such
        verb there) and otherwise like call(). `fds`: descriptors to pass along
        (SCM_RIGHTS; the server gets copies)."""
        core = self._core
        if core.closing:
            raise MicrokernelError(f"client for {core.endpoint} is closed")
        if core.key is not None:
            return None  # a server with a key serves no raw verbs
        chan = core.unix()
        if chan is None:
            return None
        if len(payload) > _carrier.MAX_RAW_PAYLOAD:
            raise ValueError(f"raw payload of {len(payload)} bytes (at most {_carrier.MAX_RAW_PAYLOAD})")
        req_id = next(chan.ids)

        def open_raw(data):
            if not _carrier.is_raw(data):
                return None, None  # a late reply to a framed call of this thread
            try:
                word, rid, body = _carrier.unpack_raw(data)
            except ProtocolError as exc:
                return req_id, ProtocolError(f"malformed raw reply from {core.endpoint}: {exc}")
            return rid, (word, body)
        timeout = self.timeout if timeout is None else timeout
        try:
            word, body = self._unix_exchange(chan, f"raw verb {tag}", _carrier.pack_raw(tag, req_id, payload),
                                             req_id, timeout, watch, spin, open_raw, _carrier.fds_message(fds),
                                             blocking=True)
        except _Refused:
            return None
        if word == _carrier.RAW_OK:
            return bytes(body)
        if word == _carrier.RAW_UNKNOWN:
            raise RemoteError("raw_unknown", f"{core.endpoint} serves no raw verb {tag}")
        message = bytes(body).decode("utf-8", "replace")
        raise RemoteError("raw_failed", f"raw verb {tag} failed at {core.endpoint}: {message}")

    def _unix_exchange(self, chan: _Unix, op: str, bufs: list, req_id: int, timeout: float,
                       watch: Watched | None, spin: float, open_reply, ancillary=(), blocking: bool = False):
        """Send one datagram over the calling thread's direct-carrier connection and
        wait for the reply to `req_id` (_await_reply with `open_reply`). `blocking` (raw
        calls: every bound inference request): sent without waiting and waited for in
        blocking receives (_Unix), two system calls a request; else Python's timeouts."""
        core = self._core
        sock = chan.sock
        deadline = time.monotonic() + timeout

        def checked(data):
            if not data:
                raise ConnectionResetError("the server closed its connection")
            chan.answered = True
            return data

        def try_receive():
            try:
                return checked(_carrier.receive(sock, socket.MSG_DONTWAIT))
            except BlockingIOError:
                return None

        def receive_within(seconds):
            if blocking:
                chan.wait_blocking(seconds)  # (a BlockingIOError when it passed)
            else:
                sock.settimeout(seconds)
            try:
                return checked(_carrier.receive(sock))
            except (socket.timeout, BlockingIOError):
                return None
        try:
            if blocking:
                try:
                    sock.sendmsg(bufs, ancillary, socket.MSG_DONTWAIT)
                except BlockingIOError:  # the server's queue is full: wait for room with Python's timeouts
                    blocking = False
            if not blocking:
                chan.blocking = False
                sock.settimeout(timeout)  # a server that reads nothing cannot hold the send longer
                sock.sendmsg(bufs, ancillary)
                # non-blocking while polling: a socket with a timeout would wait in every try_receive (Python
                # polls for readability before the recvmsg, MSG_DONTWAIT or not) - for the whole timeout
                sock.settimeout(0.0)
            return _await_reply(core, op, req_id, deadline, timeout, watch, spin, try_receive, receive_within,
                                open_reply)
        except (MicrokernelError, OSError) as exc:  # (a timeout is a MicrokernelError, and an OSError too)
            raise self._exchange_failed(chan, op, exc, watch, timeout) from None

    def _exchange_failed(self, chan: _Unix, op: str, exc: Exception, watch: Watched | None,
                         timeout: float) -> Exception:
        """What a failed exchange on `chan` raises (the connection given up where the
        next call must not use it)."""
        core = self._core
        if isinstance(exc, MicrokernelError):
            if isinstance(exc, (ProtocolError, MicrokernelTimeout)):
                # a malformed datagram, or a request the server may still be running on this
                # connection's thread: the next call gets a connection (and a thread) of its own
                chan.close()
                core.local.unix = None
            return exc
        chan.close()
        core.local.unix = None
        if isinstance(exc, TimeoutError):  # the send timed out
            return MicrokernelTimeout(f"could not send '{op}' to {core.endpoint} within {timeout:g} s")
        if not chan.answered and (watch is None or not _ends_within(watch, REFUSAL_GRACE)):
            # closed before it ever answered: the server refused the connection (its caps, direct.py); this
            # client uses ZeroMQ from now on (and the caller sends the request there)
            log.debug("direct carrier %s refused the connection: ZeroMQ only", core.direct_path)
            core.direct_path = None
            return _Refused()
        return self._dropped(op, exc, watch)

    def _dropped(self, op: str, exc: OSError, watch: Watched | None) -> MicrokernelError:
        """What a direct-carrier connection that broke during `op` means: the end of a
        watched process (it closes its sockets as it dies: wait the moment until that
        is visible, so the caller reports how it ended), else a failed call."""
        if watch is not None and _ends_within(watch, 2.0):
            return ServiceGone(f"the process serving {self._core.endpoint} ended during '{op}'")
        return MicrokernelError(f"'{op}' to {self._core.endpoint} failed: {exc}")

    def _call_direct(self, op: str, args, arrays, timeout: float, watch: Watched | None,
                     spin: float) -> tuple[dict, list]:
        core = self._core
        if core.closing:
            chan = getattr(core.local, "chan", None)
            if chan is not None:
                chan.close()
                core.local.chan = None
            raise MicrokernelError(f"client for {core.endpoint} is closed")
        chan = core.direct()
        req_id = next(chan.ids)
        frames = core.encode(req_id, op, args, arrays)
        sock = chan.sock
        deadline = time.monotonic() + timeout
        try:
            sock.send_multipart(frames, copy=False)

            def try_receive():
                try:
                    return sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    return None

            def receive_within(seconds):
                # a blocking receive with a timeout (RCVTIMEO) is cheaper than a poll()
                wait_ms = max(1, int(seconds * 1000))
                if wait_ms != chan.rcvtimeo:
                    sock.setsockopt(zmq.RCVTIMEO, wait_ms)
                    chan.rcvtimeo = wait_ms
                try:
                    return sock.recv_multipart(copy=False)
                except zmq.Again:
                    return None
            return _await_reply(core, op, req_id, deadline, timeout, watch, spin, try_receive,
                                receive_within).unwrap()
        except zmq.ZMQError as exc:
            chan.close()
            core.local.chan = None
            raise MicrokernelError(f"'{op}' to {core.endpoint} failed: {exc}") from None

    def close(self) -> None:
        """Stop the I/O thread; pending calls fail with MicrokernelError."""
        self._finalizer()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
