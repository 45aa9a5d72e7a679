"""The TensorFlow worker's request handlers (imported only inside the worker process,
once TensorFlow loaded: framework.load_tensorflow): freeze (freezing.py),
infer_subgraph, load_subgraph, run_subgraph (subgraphs.py), bind_run and its raw
runs (bound_runs.py). The verbs, their
arguments and results: core/services/tf_worker.py."""
from __future__ import annotations

from core.services import tf_worker as contract


def register(server, tf):
    """Registers every verb; returns the cleanup serve_main runs at the end."""
    from fallback_workers.tf_worker.freezing import freeze
    from fallback_workers.tf_worker.bound_runs import BoundRuns
    from fallback_workers.tf_worker.subgraphs import Subgraphs
    subgraphs = Subgraphs(tf)
    bound = BoundRuns(subgraphs)
    subgraphs.on_unmap = bound.forget_buffer
    server.handle(contract.FREEZE, lambda args, arrays: freeze(tf, args))
    server.handle(contract.INFER_SUBGRAPH, subgraphs.infer)
    # the daemon's path to its worker: the local carrier, where the connection's own thread receives, runs and
    # replies (the main socket hands each request to a pool thread and its reply back, ~0.1 ms on every offloaded
    # layer's call); the main socket for what does not fit a datagram, or a refused connection
    for op, fn in ((contract.LOAD_SUBGRAPH, subgraphs.load), (contract.RUN_SUBGRAPH, subgraphs.run),
                   (contract.BIND_RUN, bound.bind)):
        server.handle(op, fn)
        server.handle(op, fn, lane="local")
    # bound runs: the daemon's repeated runs through one buffer as 8-byte raw datagrams (bound_runs.py)
    server.handle_raw(contract.RAW_RUN, bound.run)
    # shared buffers: the daemon hands their descriptors over (a sandboxed worker sees no other process)
    server.handle_raw(contract.RAW_SHARE, subgraphs.share, fds=True)

    def cleanup(reason):
        subgraphs.close()
    return cleanup
