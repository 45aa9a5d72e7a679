"""The TensorFlow worker's verbs (this process is the only one that imports
TensorFlow): freeze (freezing.py), infer_subgraph, load_subgraph, run_subgraph
(subgraphs.py). Their arguments and results: core/services/tf_worker.py."""
from __future__ import annotations

import os
import sys

from core.microkernel import RemoteError
from core.services import tf_worker as contract


def import_tensorflow():
    """(tensorflow module or None, why not)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import tensorflow as tf
    except Exception as exc:  # missing, or an install that does not load here
        return None, "{}: {}".format(type(exc).__name__, exc)
    return tf, None


def register(server, refuse_io_ops: bool = False, parent_pid: int | None = None):
    """Registers every verb; returns the cleanup serve_main runs at the end."""
    tf, problem = import_tensorflow()
    server.info["framework"] = {"name": "tensorflow", "available": tf is not None,
                                "version": getattr(tf, "__version__", None), "error": problem}
    subgraphs = None
    if tf is not None:
        from fallback_workers.tf_worker.subgraphs import Subgraphs
        subgraphs = Subgraphs(tf, refuse_io_ops, parent_pid)

    def needs_tensorflow(handler):
        def run(args, arrays):
            if tf is None:
                raise RemoteError(contract.FRAMEWORK_MISSING, "TensorFlow cannot be imported by {} ({}); {}".format(
                    sys.executable, problem, contract.INSTALL_HINT))
            return handler(args, arrays)
        return run

    def freeze(args, arrays):
        from fallback_workers.tf_worker.freezing import freeze as run
        return run(tf, args)

    server.handle(contract.FREEZE, needs_tensorflow(freeze))
    server.handle(contract.INFER_SUBGRAPH, needs_tensorflow(lambda a, arr: subgraphs.infer(a, arr)))
    server.handle(contract.LOAD_SUBGRAPH, needs_tensorflow(lambda a, arr: subgraphs.load(a, arr)))
    server.handle(contract.RUN_SUBGRAPH, needs_tensorflow(lambda a, arr: subgraphs.run(a, arr)))

    def cleanup(reason):
        if subgraphs is not None:
            subgraphs.close()
    return cleanup
