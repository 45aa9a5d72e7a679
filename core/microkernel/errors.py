"""Exceptions of the microkernel (wire protocol, endpoints, clients, supervisor).

They all derive from `MicrokernelError` so a caller can catch "anything that went
wrong talking to another process" in one place. This module imports nothing from
the rest of core/ on purpose: the workers and daemons import the microkernel too.
"""
from __future__ import annotations


class MicrokernelError(Exception):
    """Base class of every error raised by core.microkernel."""


class ProtocolError(MicrokernelError):
    """A message is malformed: bad msgpack, bad header schema, bad array metadata,
    limits exceeded, or a missing/wrong HMAC signature."""


class AuthenticationError(ProtocolError):
    """A message has no valid HMAC signature while a key is configured."""


class EndpointError(MicrokernelError):
    """An endpoint, runtime directory or key file is unusable or insecure."""


class MicrokernelTimeout(MicrokernelError, TimeoutError):
    """No reply arrived in time (also a builtin TimeoutError, so generic code that
    catches TimeoutError keeps working)."""


class ServiceGone(MicrokernelError):
    """The process serving a call ended before it replied (seen by a caller that
    watches it: Client.call(watch=...), PendingCall.result(watch=...))."""


class WorkerError(MicrokernelError):
    """A supervised worker process died, failed to start, or the supervisor gave up
    restarting it. `exit_status` is a text such as "killed by signal SIGKILL";
    `stderr_tail` holds the last lines the worker wrote to stderr."""

    def __init__(self, message: str, *, exit_status: str | None = None,
                 stderr_tail: str = ""):
        super().__init__(message)
        self.exit_status = exit_status
        self.stderr_tail = stderr_tail


class RemoteError(MicrokernelError):
    """An error reply: raised by a handler on the serving side (then sent over the
    wire), and re-raised on the calling side.

    `kind` is a short machine-readable category. Handlers choose their own kinds
    for user errors (e.g. "shape", "user"); the microkernel itself uses
    "protocol" (malformed request), "unknown_op" and "internal" (a handler raised
    something that is not a RemoteError; `traceback` then holds a short text).
    `faq` is the reference FAQ question number, when there is one.
    """

    def __init__(self, kind: str, message: str, faq: int | None = None, *,
                 traceback: str | None = None):
        super().__init__(kind, message, faq)
        self.kind = kind
        self.message = message
        self.faq = faq
        self.traceback = traceback

    def __str__(self) -> str:
        text = f"{self.kind}: {self.message}"
        if self.faq is not None:
            text += f" (FAQ #{self.faq})"
        return text
