"""`python -m fallback_workers.tf_worker --endpoint EP`: the TensorFlow worker (its
contract: core/services/tf_worker.py)."""
import sys

from core.microkernel import serve_main


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
    return register(server, tf)


if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1:], "tf", _setup))
