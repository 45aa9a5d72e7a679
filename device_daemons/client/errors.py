"""The error of a request the daemon refused (InferenceError) and how a daemon's
error reply becomes a client error (remote_error). Apart from api.py (which
re-exports InferenceError) because the transport (transport.py, request_path.py)
raises them too; the errors about the daemon process itself (DaemonError and its
kinds) are in daemon.py.
"""
from __future__ import annotations

from core.errors import Error
from core.microkernel import RemoteError

from .daemon import DaemonError


class InferenceError(Error):
    """The daemon refused a request: bad input, a network it cannot run, a failing
    custom kernel. `kind` is the daemon's error kind ("input", "network", ...)."""

    def __init__(self, message: str, kind: str = "", faq: int | None = None):
        super().__init__(message, faq=faq)
        self.kind = kind


def remote_error(exc: RemoteError, device: str) -> Error:
    if exc.kind in ("internal", "protocol", "unknown_op"):
        text = f"{device} daemon failed: {exc.kind}: {exc.message}"
        if exc.traceback:
            text += "\n" + exc.traceback
        return DaemonError(text)
    return InferenceError(f"{device} daemon: {exc.message}", exc.kind, exc.faq)
