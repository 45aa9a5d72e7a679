"""Loading TensorFlow in the worker, and what the worker serves when it cannot."""
from __future__ import annotations

import os
import sys

from core.microkernel import RemoteError
from core.services import tf_worker as contract


def load_tensorflow():
    """(the tensorflow module, None), or (None, why it cannot be imported)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import tensorflow as tf
    except Exception as exc:  # noqa: BLE001 - any failure at import means no TensorFlow here
        return None, "TensorFlow cannot be imported by {} ({}: {}); {}".format(
            sys.executable, type(exc).__name__, exc, contract.INSTALL_HINT)
    return tf, None


def register_missing(server, error: str) -> None:
    """Every verb answers kind framework_missing with `error` (FAQ #41)."""
    def missing(args, arrays):
        raise RemoteError(contract.FRAMEWORK_MISSING, error, 41)
    for verb in (contract.FREEZE,):
        server.handle(verb, missing)
