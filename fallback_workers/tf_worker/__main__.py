"""`python -m fallback_workers.tf_worker --endpoint EP`: the TensorFlow worker
(its contract: core/services/tf_worker.py)."""
import sys

from core.microkernel import serve_main
from core.services import tf_worker as contract


def _add_arguments(parser):
    parser.add_argument(contract.REFUSE_IO_OPS, action="store_true",
                        help="refuse graphs with ops that reach files, the network or Python (a daemon's worker)")


def _setup(server, opts):
    from fallback_workers.tf_worker.service import register
    return register(server, refuse_io_ops=opts.refuse_io_ops, parent_pid=opts.parent_pid or None)


if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1:], "tf", _setup, add_arguments=_add_arguments))
