"""The REST front end: the protocol's routes as a FastAPI app (served by uvicorn in
the embedded mode). Handlers take the raw request and build the response bytes
themselves (no pydantic models in the request path: tensors are large); blocking
backend calls run in the thread pool.

One ASGI middleware in front of every route: the bearer token (the health routes
are open, for probes), the body size limit from Content-Length, and one access-log
line per request."""
from __future__ import annotations

import logging
import time

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from .errors import ServingError, bad_request
from .frontend import Server
from .rest_codec import HEADER_LENGTH, encode_infer, error_body, parse_infer

log = logging.getLogger("mo_core.serve")
OPEN_PATHS = ("/v2/health/live", "/v2/health/ready")
JSON = "application/json"


def _json(doc, status: int = 200) -> Response:
    return Response(orjson.dumps(doc), status_code=status, media_type=JSON)


def _error(exc: ServingError) -> Response:
    return Response(error_body(exc), status_code=exc.status, media_type=JSON)


class Guard:
    """ASGI middleware: auth, body size, access log."""

    def __init__(self, app, server: Server, max_body: int):
        self.app = app
        self.server = server
        self.max_body = max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        state = {"status": 0, "bytes": 0}

        async def send_logged(message):
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
            elif message["type"] == "http.response.body":
                state["bytes"] += len(message.get("body", b""))
            await send(message)

        try:
            rejection = self._reject(scope)
            if rejection is not None:
                await rejection(scope, receive, send_logged)
            else:
                await self.app(scope, receive, send_logged)
        finally:
            client = scope.get("client")
            self.server.log_access(f"{client[0]}:{client[1]}" if client else "-",
                                   f"{scope['method']} {scope['path']}", state["status"], state["bytes"], t0)

    def _reject(self, scope):
        headers = dict(scope["headers"])
        if scope["path"] not in OPEN_PATHS and not self.server.authorized(headers.get(b"authorization")):
            return Response(b'{"error":"missing or wrong bearer token (Authorization: Bearer TOKEN)"}',
                            status_code=401, media_type=JSON, headers={"WWW-Authenticate": "Bearer"})
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            return _error(ServingError(f"the request body ({length.decode('latin-1')[:20]} bytes) is larger than "
                                       f"the server's limit of {self.max_body} bytes (--max-body)", 413))
        encoding = headers.get(b"content-encoding", b"identity").lower()
        if encoding != b"identity":
            return _error(ServingError(f"Content-Encoding {encoding.decode('latin-1')[:20]!r} is not supported; "
                                       f"send the body uncompressed", 415))
        return None


async def _body(request: Request, limit: int) -> bytes:
    """The body, at most `limit` bytes (a chunked body has no Content-Length to check first)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ServingError(f"the request body is larger than the server's limit of {limit} bytes (--max-body)",
                               413)
        chunks.append(chunk)
    return b"".join(chunks)


def make_app(server: Server, max_body: int) -> FastAPI:
    app = FastAPI(title="mo-core inference server", openapi_url=None, docs_url=None, redoc_url=None)
    backend = server.backend

    def route(path: str, methods=("GET",)):
        def register(fn):
            async def handler(request: Request) -> Response:
                try:
                    return await fn(request, **request.path_params)
                except ServingError as exc:
                    return _error(exc)
                except Exception as exc:  # noqa: BLE001 - a bug: logged with its traceback, the server goes on
                    log.exception("internal error in %s %s", request.method, request.url.path)
                    return _error(ServingError(f"internal error: {type(exc).__name__}: {exc}", 500, "OTHER"))
            app.add_api_route(path, handler, methods=list(methods), include_in_schema=False)
            return fn
        return register

    async def optional_json(request: Request) -> dict:
        body = await _body(request, max_body)
        if not body.strip():
            return {}
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise bad_request(f"the request body is not valid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise bad_request("the request body must be a JSON object")
        return doc

    @route("/v2/health/live")
    async def live(request):
        return Response(status_code=200)

    @route("/v2/health/ready")
    async def ready(request):
        return Response(status_code=200 if backend.ready() else 400)

    @route("/v2")
    async def metadata(request):
        return _json(server.metadata())

    @route("/v2/models/{name}")
    @route("/v2/models/{name}/versions/{version}")
    async def model_metadata(request, name, version=""):
        return _json(await run_in_threadpool(backend.metadata, name, version))

    @route("/v2/models/{name}/ready")
    @route("/v2/models/{name}/versions/{version}/ready")
    async def model_ready(request, name, version=""):
        return Response(status_code=200 if backend.model_ready(name, version) else 400)

    @route("/v2/models/{name}/config")
    @route("/v2/models/{name}/versions/{version}/config")
    async def model_config(request, name, version=""):
        return _json(await run_in_threadpool(backend.model_config, name, version))

    @route("/v2/models/stats")
    @route("/v2/models/{name}/stats")
    @route("/v2/models/{name}/versions/{version}/stats")
    async def stats(request, name="", version=""):
        return _json({"model_stats": await run_in_threadpool(server.statistics, name, version)})

    @route("/v2/models/{name}/infer", ("POST",))
    @route("/v2/models/{name}/versions/{version}/infer", ("POST",))
    async def infer(request, name, version=""):
        body = await _body(request, max_body)
        req = parse_infer(body, request.headers.get(HEADER_LENGTH), name, version)
        response = await run_in_threadpool(server.infer, req)
        data, header_length = encode_infer(req, response)
        if header_length is None:
            return Response(data, media_type=JSON)
        return Response(data, media_type="application/octet-stream",
                        headers={"Inference-Header-Content-Length": str(header_length)})

    @route("/v2/repository/index", ("POST",))
    async def index(request):
        doc = await optional_json(request)
        return _json(await run_in_threadpool(backend.index, bool(doc.get("ready", False))))

    @route("/v2/repository/models/{name}/load", ("POST",))
    async def load(request, name):
        doc = await optional_json(request)
        params = doc.get("parameters") or {}
        if not isinstance(params, dict):
            raise bad_request("'parameters' must be a JSON object")
        unsupported = sorted(k for k in params if k == "config" or k.startswith("file:"))
        if unsupported:
            raise bad_request(f"load parameters {unsupported} are not supported: edit the model's config.json and "
                              f"files in the repository, then load it")
        await run_in_threadpool(backend.load, name)
        return Response(status_code=200)

    @route("/v2/repository/models/{name}/unload", ("POST",))
    async def unload(request, name):
        await optional_json(request)
        await run_in_threadpool(backend.unload, name)
        return Response(status_code=200)

    @route("/metrics")
    async def metrics(request):
        return Response(generate_latest(server.stats.registry), media_type=CONTENT_TYPE_LATEST)

    return app


def wrap(app, server: Server, max_body: int):
    """The app behind its Guard (auth, body limit, access log)."""
    return Guard(app, server, max_body)
