"""`python -m fallback_workers.tf_worker --endpoint EP`: the TensorFlow worker (contract.py)."""
import sys

from core.microkernel import serve_main


def _setup(server, opts):
    from fallback_workers.tf_worker.service import register
    register(server)


if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1:], "tf", _setup))
