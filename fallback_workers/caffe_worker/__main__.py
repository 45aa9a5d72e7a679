"""`python -m fallback_workers.caffe_worker --endpoint EP [--python-path DIR ...]
[--python-layers any|configured]`: the Caffe worker (its contract: contract.py)."""
import sys

from core.microkernel import serve_main
from core.services import caffe_worker as contract


def _add_arguments(parser):
    parser.add_argument("--python-path", action="append", default=[], metavar="DIR",
                        help="a directory Python layers are imported from (may be repeated)")
    parser.add_argument("--python-layers", choices=contract.PYTHON_LAYERS, default="any",
                        help="configured: Python layers only from --python-path directories")


def _setup(server, opts):
    from fallback_workers.caffe_worker.framework import load_caffe
    caffe, error = load_caffe(opts.python_path)
    server.info["framework"] = {"name": "caffe", "available": caffe is not None,
                                "version": getattr(caffe, "__version__", None), "error": error}
    if caffe is None:
        from fallback_workers.caffe_worker.framework import register_missing
        register_missing(server, error)
    else:
        from fallback_workers.caffe_worker.service import register
        register(server, opts.python_path, opts.python_layers)


if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1:], "caffe", _setup, add_arguments=_add_arguments))
