"""`mo-core serve --model_repository DIR`: the embedded mode. One process serves
REST (uvicorn) and gRPC (grpcio) from the same Server; the models are loaded on
device daemons this process starts in its own runtime directory (daemons.py) and
stops at the end. The models load in the background after the ports are open:
/v2/health/ready says 400 until every one of them is READY.

SIGINT / SIGTERM: stop accepting, let in-flight requests finish (grace), unload the
models, stop the daemons, exit 0."""
from __future__ import annotations

import ipaddress
import logging
import signal
import socket
import ssl
import threading
from dataclasses import dataclass

from core.errors import Error

from .frontend import Server, read_token

log = logging.getLogger("mo_core.serve")


@dataclass
class ServeOptions:
    model_repository: str
    host: str = "127.0.0.1"
    http_port: int = 8000
    grpc_port: int = 8001
    auth_token_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    insecure: bool = False
    max_body: int = 64 << 20
    cache_dir: str | None = None
    load_models: list | None = None  # None: every model of the repository
    access_log: bool = True
    grace: float = 10.0
    open_metrics: bool = False  # /metrics without the token


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [ %(levelname)s ]  %(message)s")
    for noisy in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def security(opts: ServeOptions) -> tuple[bytes | None, tuple[bytes, bytes] | None]:
    """(token, (cert, key) PEM) from the options' files; a non-loopback bind needs a
    token or --insecure."""
    token = read_token(opts.auth_token_file) if opts.auth_token_file else None
    if token is None and not opts.insecure and not is_loopback(opts.host):
        raise Error("binding {} (not a loopback address) without --auth-token-file lets anyone on the network "
                    "run and unload models; give a token file, or --insecure if a proxy in front does the "
                    "authentication", opts.host)
    if bool(opts.tls_cert) != bool(opts.tls_key):
        raise Error("TLS needs both --tls-cert and --tls-key")
    tls = None
    if opts.tls_cert:
        try:
            with open(opts.tls_cert, "rb") as f:
                cert = f.read(1 << 20)
            with open(opts.tls_key, "rb") as f:
                key = f.read(1 << 20)
        except OSError as exc:
            raise Error("cannot read the TLS files: {}", exc) from None
        if b"-----BEGIN" not in cert or b"-----BEGIN" not in key:
            raise Error("--tls-cert and --tls-key must be PEM files ({}, {})", opts.tls_cert, opts.tls_key)
        try:  # (grpcio only says "Failed to bind" for a pair that does not fit; OpenSSL says why)
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(opts.tls_cert, opts.tls_key)
        except ssl.SSLError as exc:
            raise Error("the TLS certificate {} and key {} cannot be used together: {}; give the key the "
                        "certificate was made for (PEM, not encrypted)", opts.tls_cert, opts.tls_key,
                        exc.reason or exc) from None
        tls = (cert, key)
    return token, tls


def address(host: str, port: int) -> str:
    """host:port, an IPv6 address in brackets ([::1]:8001)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise Error("cannot listen on {}: {}", address(host, port), exc.strerror) from None
    sock.listen(2048)
    return sock


def run_http(app, sock: socket.socket, opts: ServeOptions) -> None:
    """uvicorn on the bound socket until SIGINT/SIGTERM."""
    import uvicorn
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=int(opts.grace), ssl_certfile=opts.tls_cert,
                            ssl_keyfile=opts.tls_key, server_header=False)
    # uvicorn re-raises the signal that stopped it once it is done: let that be a no-op
    # here (the default SIGTERM action would end the process before the clean-up)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    uvicorn.Server(config).run(sockets=[sock])


def serve(opts: ServeOptions) -> int:
    """The embedded mode: the models on daemons of this process."""
    from device_daemons.client import IECore

    from .daemons import OwnedDaemons
    from .manager import ModelManager
    from .repository import ModelRepository

    setup_logging()
    token, tls = security(opts)
    repository = ModelRepository(opts.model_repository, opts.cache_dir)
    names = opts.load_models if opts.load_models is not None else repository.names()
    http_sock = listen(opts.host, opts.http_port)
    daemons = OwnedDaemons()
    ie = manager = None
    try:
        ie = IECore(policy="auto")
        manager = ModelManager(repository, ie)
        run_frontend(opts, manager, names, token, tls, http_sock, f"device daemons in {daemons.runtime_dir}")
    finally:
        if manager is not None:
            manager.close()
        if ie is not None:
            ie.close()
        daemons.close()
        http_sock.close()
        log.info("stopped")
    return 0


def run_frontend(opts: ServeOptions, backend, names: list, token, tls, http_sock, where: str) -> None:
    """REST and gRPC over `backend` until SIGINT/SIGTERM, the models `names` loaded
    in the background (the embedded and the Ray mode alike)."""
    from core.microkernel.heap import keep_freed_buffers

    from .grpc_service import make_server
    from .rest import make_app, wrap

    keep_freed_buffers()
    server = Server(backend, token, opts.access_log, opts.open_metrics)
    try:
        grpc_server, grpc_port = make_server(server, address(opts.host, opts.grpc_port), opts.max_body, tls=tls)
    except (OSError, RuntimeError) as exc:
        raise Error("cannot listen on {} (gRPC): {}", address(opts.host, opts.grpc_port), exc) from None
    try:
        scheme = "https" if tls else "http"
        log.info("mo-core %s serving %s: REST on %s://%s, gRPC on %s%s; %s", server.version,
                 opts.model_repository, scheme, address(opts.host, http_sock.getsockname()[1]),
                 address(opts.host, grpc_port), " (TLS)" if tls else "", where)
        loader = threading.Thread(target=_load, args=(backend, names), name="loader", daemon=True)
        loader.start()
        run_http(wrap(make_app(server, opts.max_body), server, opts.max_body), http_sock, opts)
        log.info("shutting down")
    finally:
        grpc_server.stop(grace=opts.grace).wait()


def _load(manager, names) -> None:
    manager.load_all(names)
    if manager.ready():
        log.info("ready: %d model%s loaded", len(names), "" if len(names) == 1 else "s")
    else:
        failed = [e["name"] for e in manager.index() if e.get("state") == "UNAVAILABLE"]
        log.warning("not ready: %s failed to load (the others serve; see above, or /v2/repository/index)",
                    ", ".join(sorted(set(failed))) or "some models")
