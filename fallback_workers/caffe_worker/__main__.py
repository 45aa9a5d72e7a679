import sys

from core.microkernel import serve_main


def _setup(server, opts):
    from fallback_workers.caffe_worker.service import register
    register(server)


if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1:], "caffe", _setup))
