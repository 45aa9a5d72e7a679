"""`mo-core serve`: the open inference protocol (KServe v2 REST + gRPC) over the
device daemons, from a model repository (device_daemons/serving).

    mo-core serve --model_repository models/                          # embedded: REST :8000, gRPC :8001
    mo-core serve --model_repository models/ --ray auto --replicas 2  # each model a Ray Serve deployment
"""
import math
import os

from core.errors import Error


def add_parser(sub):
    p = sub.add_parser("serve", help="serve a model repository over the KServe v2 / Triton protocol (REST, gRPC)",
                       description="Serve the models of a repository (<model>/<version>/model.xml + .bin, or a "
                                   "Caffe / TensorFlow model converted on load; optional <model>/config.json) "
                                   "over the open inference protocol (KServe v2) that tritonclient, KServe and "
                                   "OpenVINO Model Server clients speak. Embedded by default (one process, its own "
                                   "device daemons); with --ray each model is a Ray Serve deployment.")
    p.add_argument("--model_repository", "--model-repository", required=True, metavar="DIR",
                   help="the model repository directory")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; any other needs --auth-token-file or --insecure)")
    p.add_argument("--http-port", type=int, default=8000, help="REST port (default 8000; 0 picks a free one)")
    p.add_argument("--grpc-port", type=int, default=8001, help="gRPC port (default 8001; 0 picks a free one)")
    p.add_argument("--auth-token-file", metavar="FILE",
                   help="a file (mode 600) holding a bearer token every request must carry "
                        "(Authorization: Bearer TOKEN; the health routes stay open for probes)")
    p.add_argument("--tls-cert", metavar="PEM", help="TLS certificate (chain) for REST and gRPC")
    p.add_argument("--tls-key", metavar="PEM", help="TLS private key for REST and gRPC")
    p.add_argument("--insecure", action="store_true",
                   help="allow a non-loopback --host without --auth-token-file (a proxy in front authenticates)")
    p.add_argument("--max-body-mb", type=float, default=64.0,
                   help="largest request body (REST) and message (gRPC) in MiB (default 64)")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="where models converted on load are kept (default $MO_CORE_HOME/serve-cache)")
    p.add_argument("--load-model", action="append", metavar="NAME",
                   help="load only these models at start (may be repeated; the others can be loaded with "
                        "the repository API). Default: every model")
    p.add_argument("--no-access-log", action="store_true", help="no log line per request")
    p.add_argument("--grace", type=float, default=10.0,
                   help="seconds in-flight requests get at shutdown (default 10)")
    p.add_argument("--metrics-without-token", action="store_true",
                   help="serve /metrics without --auth-token-file's token, for a Prometheus scrape (which "
                        "carries none; Triton's metrics port asks none either): whoever reaches the port then "
                        "reads the model names and request counts")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="serve each model as a Ray Serve deployment on this Ray cluster ('auto': the one "
                        "`ray start` runs here; needs pip install mo-core[ray])")
    p.add_argument("--replicas", type=int, default=None,
                   help="with --ray: replicas per model whose config.json does not say (default 1)")
    p.set_defaults(func=run)


def run(args) -> int:
    extra = "ray" if args.ray is not None else "serve"
    try:  # (optional packages: a plain `pip install mo-core` has none of them)
        from device_daemons.serving.embedded import ServeOptions, serve
        if args.ray is not None:
            from device_daemons.serving.ray_mode import serve_ray
    except ImportError as exc:
        raise Error("mo-core serve{} needs packages this Python cannot import ({}): pip install mo-core[{}]",
                    " --ray" if args.ray is not None else "", exc, extra) from None
    for name in ("http_port", "grpc_port"):
        port = getattr(args, name)
        if not 0 <= port <= 65535:
            raise Error("--{} must be from 0 to 65535, got {}", name.replace("_", "-"), port)
    if args.http_port and args.http_port == args.grpc_port:
        raise Error("--http-port and --grpc-port must differ (both {})", args.http_port)
    if not 0 < args.max_body_mb <= 2047:
        raise Error("--max-body-mb must be from 0 to 2047 (gRPC's limit), got {}", args.max_body_mb)
    if not (math.isfinite(args.grace) and args.grace >= 0):
        raise Error("--grace must be a number of seconds >= 0, got {}", args.grace)
    if not os.path.isdir(args.model_repository):
        raise Error("--model_repository {} is not a directory", args.model_repository)
    if args.replicas is not None and (args.ray is None or args.replicas < 1):
        raise Error("--replicas is a positive number of Ray Serve replicas: it needs --ray")
    opts = ServeOptions(args.model_repository, args.host, args.http_port, args.grpc_port, args.auth_token_file,
                        args.tls_cert, args.tls_key, args.insecure, int(args.max_body_mb * (1 << 20)),
                        args.cache_dir, args.load_model, not args.no_access_log, args.grace,
                        args.metrics_without_token)
    if args.ray is not None:
        return serve_ray(opts, args.ray, args.replicas or 1)
    return serve(opts)
