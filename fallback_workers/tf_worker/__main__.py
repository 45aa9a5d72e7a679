"""`python -m fallback_workers.tf_worker --endpoint EP [--refuse-io-ops]`: the
TensorFlow worker (its contract: core/services/tf_worker.py)."""
import sys

from core.microkernel import serve_main
from core.services import tf_worker as contract


def _add_arguments(parser):
    parser.add_argument(contract.REFUSE_IO_OPS, action="store_true",
                        help="refuse graphs with ops that reach files, the network or Python (a daemon's worker)")


def _setup(server, opts):
    from fallback_workers.tf_worker.framework import load_tensorflow
    tf, error = load_tensorflow()
    server.info["framework"] = {"name": "tensorflow", "available": tf is not None,
                                "version": getattr(tf, "__version__", None), "error": error}
    if tf is None:
        from fallback_workers.tf_worker.framework import register_missing
        register_missing(server, error)
        return None
    from fallback_workers.tf_worker.service import register
    return register(server, tf, refuse_io_ops=opts.refuse_io_ops, parent_pid=opts.parent_pid or None)


if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1:], "tf", _setup, add_arguments=_add_arguments))
