"""Loading pycaffe in the worker, and what the worker serves when it cannot."""
from __future__ import annotations

import os
import sys

from core.microkernel import RemoteError

from core.services import caffe_worker as contract


def load_caffe(python_path: list[str]):
    """(the caffe module, None), or (None, why it cannot be imported). The
    --python-path directories go first on sys.path (Python layers live there)."""
    for directory in reversed(python_path):
        if directory and directory not in sys.path:
            sys.path.insert(0, directory)
    os.environ.setdefault("GLOG_minloglevel", "2")
    try:
        import caffe
    except Exception as exc:  # noqa: BLE001 - any failure at import means no Caffe here
        return None, (f"pycaffe is not importable in the Caffe worker ({type(exc).__name__}: {exc}). Build "
                      f"pycaffe (the README's set-up does it) or put it on PYTHONPATH.")
    caffe.set_mode_cpu()
    return caffe, None


def register_missing(server, error: str) -> None:
    """Every verb answers kind framework_missing with `error`."""
    def missing(args, arrays):
        raise RemoteError(contract.FRAMEWORK_MISSING, error, 14)
    for verb in (contract.INFER_SHAPES, contract.FORWARD_LAYER):
        server.handle(verb, missing)
