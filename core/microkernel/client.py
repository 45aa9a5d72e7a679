"""The calling side: a thread-safe request/reply client over a DEALER socket.

Threading model: one private I/O thread owns the DEALER socket. Callers (any
number of threads) encode and sign their request in their own thread, register a
PendingCall under a fresh request id, and post the frames to the I/O thread
through a Mailbox. The I/O thread sends, receives, decodes and verifies replies,
and completes the PendingCall with the matching id. Replies whose id is unknown
(never sent, or already timed out / cancelled) are discarded, so a late reply can
never be mistaken for the answer to another request.
"""
from __future__ import annotations

import itertools
import logging
import threading
import weakref
from typing import Any, Sequence

import numpy as np
import zmq

from .auth import sign_frames, verify_frames
from .endpoints import check_endpoint
from .errors import AuthenticationError, MicrokernelError, MicrokernelTimeout, ProtocolError
from .mailbox import Mailbox
from .protocol import DEFAULT_LIMITS, Limits, Reply, decode_reply, encode_request, peek_id

log = logging.getLogger("mo_core.microkernel.client")


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

    def result(self, timeout: float | None = None) -> tuple[dict, list]:
        """(result, arrays) of the reply. Waits at most `timeout` s (default: the
        client's timeout), then raises MicrokernelTimeout and forgets the request.
        An error reply raises RemoteError."""
        t = self._core.timeout if timeout is None else timeout
        if not self._event.wait(t):
            self.cancel()
            if not self._event.is_set():
                raise MicrokernelTimeout(
                    f"no reply to '{self.op}' from {self._core.endpoint} within {t:g} s "
                    f"(request {self.id})")
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


class _Core:
    """State shared by the Client facade and its I/O thread (kept separate so a
    forgotten Client can be garbage-collected and its finalizer stop the thread)."""

    def __init__(self, endpoint: str, timeout: float, key: bytes | None, limits: Limits):
        self.endpoint = endpoint
        self.timeout = timeout
        self.key = key
        self.limits = limits
        self.lock = threading.Lock()
        self.pending: dict[int, PendingCall] = {}
        self.ids = itertools.count(1)
        self.outbox = Mailbox()
        self.closing = False
        ctx = zmq.Context.instance()
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.MAXMSGSIZE, limits.max_message_bytes)
        try:
            self.sock.connect(endpoint)
        except zmq.ZMQError as exc:
            self.sock.close(0)
            self.outbox.close()
            raise MicrokernelError(f"cannot connect to {endpoint}: {exc}") from None
        # The socket is handed over to the I/O thread here and never touched again
        # by this thread (thread start is a full memory barrier, as zmq requires).
        self.thread = threading.Thread(target=self.io_loop, daemon=True,
                                       name=f"mk-client {endpoint}")
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

    def on_reply(self, frames: list) -> None:
        if self.key is not None:
            try:
                frames = verify_frames(self.key, frames)
            except AuthenticationError as exc:
                log.warning("dropped a reply from %s: %s", self.endpoint, exc)
                return
        try:
            reply = decode_reply(frames, self.limits)
        except ProtocolError as exc:
            rid = peek_id(frames, self.limits)
            call = self.forget(rid) if rid is not None else None
            if call is None:
                log.warning("dropped a malformed reply from %s: %s", self.endpoint, exc)
            else:
                call._complete(error=ProtocolError(f"malformed reply from {self.endpoint}: {exc}"))
            return
        call = self.forget(reply.id)
        if call is None:
            log.debug("discarded a reply with unknown or stale id %d", reply.id)
            return
        call._complete(reply=reply)

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        self.outbox.put(None)  # wake the I/O thread
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout=5.0)
        self.outbox.close()


class Client:
    """`Client(endpoint, timeout=30.0, key=None)`: call verbs of a Server.

    Thread-safe: any number of threads may `call` at once; each gets its own reply.
    """

    def __init__(self, endpoint: str, *, timeout: float = 30.0, key: bytes | None = None,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        check_endpoint(endpoint, have_key=key is not None)
        self._core = _Core(endpoint, timeout, key, limits)
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

    def call_async(self, op: str, args: dict | None = None,
                   arrays: Sequence[np.ndarray] | None = None) -> PendingCall:
        """Send a request now; returns its PendingCall. Arrays are sent zero-copy:
        do not modify them until the call is done."""
        core = self._core
        if core.closing:
            raise MicrokernelError(f"client for {core.endpoint} is closed")
        with core.lock:
            req_id = next(core.ids)
        frames = encode_request(req_id, op, args, arrays, core.limits)
        if core.key is not None:
            frames = sign_frames(core.key, frames)
        call = PendingCall(core, req_id, op)
        with core.lock:
            core.pending[req_id] = call
        if not core.outbox.put((req_id, frames)):
            core.forget(req_id)
            raise MicrokernelError(f"client for {core.endpoint} is closed")
        return call

    def call(self, op: str, args: dict | None = None, arrays: Sequence[np.ndarray] | None = None,
             timeout: float | None = None) -> tuple[dict, list]:
        """Request/reply: (result, arrays). Raises RemoteError for an error reply,
        MicrokernelTimeout when no reply comes within `timeout` (default: the
        client's)."""
        return self.call_async(op, args, arrays).result(timeout)

    def close(self) -> None:
        """Stop the I/O thread; pending calls fail with MicrokernelError."""
        self._finalizer()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
