"""The REST front end: the protocol's routes as a FastAPI app (served by uvicorn in
the embedded mode). Handlers take the raw request and build the response bytes
themselves (no pydantic models in the request path: tensors are large); blocking
backend calls run in the thread pool.

The infer route is a plain ASGI endpoint in front of the app (InferEndpoint): it is
the one every request to a model takes, and FastAPI's routing, middleware stack and
Request/Response objects cost it 0.2-0.3 ms a request here after a network's compute
has left the interpreter's caches cold (timestamps in the front end, GoogLeNet).

One ASGI middleware in front of both: the bearer token (the health routes are open,
for probes), the body size limit from Content-Length, and one access-log line per
request."""
from __future__ import annotations

import logging
import re
import time

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from .errors import ServingError, bad_request
from .frontend import Server
from .rest_codec import HEADER_LENGTH, encode_infer, error_body, parse_infer

log = logging.getLogger("mo_core.serve")
OPEN_PATHS = ("/v2/health/live", "/v2/health/ready")  # no token asked (probes), /metrics too if told
JSON = "application/json"
HEADER_LENGTH_KEY = HEADER_LENGTH.encode()  # (ASGI header names are lower-case bytes)
JSON_TYPE = (b"content-type", JSON.encode())


def _json(doc, status: int = 200) -> Response:
    return Response(orjson.dumps(doc), status_code=status, media_type=JSON)


def _error(exc: ServingError) -> Response:
    return Response(error_body(exc), status_code=exc.status, media_type=JSON)


def _internal(exc: Exception, method: str, path: str) -> ServingError:
    """A bug in a handler: logged with its traceback, answered 500; the server goes on."""
    log.exception("internal error in %s %s", method, path)
    return ServingError(f"internal error: {type(exc).__name__}: {exc}", 500, "OTHER")


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
            if self.server.access_logging:
                client = scope.get("client")
                self.server.log_access(f"{client[0]}:{client[1]}" if client else "-",
                                       f"{scope['method']} {scope['path']}", state["status"], state["bytes"], t0)

    def _reject(self, scope):
        headers = dict(scope["headers"])
        path = scope["path"]
        if path not in OPEN_PATHS and not (path == "/metrics" and self.server.open_metrics) and \
                not self.server.authorized(headers.get(b"authorization")):
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


async def _body(receive, limit: int) -> bytes | None:
    """The body, at most `limit` bytes (a chunked body has no Content-Length to check
    first); None when the client went away before it was all there."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ServingError(f"the request body is larger than the server's limit of {limit} bytes (--max-body)",
                               413)
        if chunk:
            chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)  # (one chunk: that same object, no copy)


INFER_PATH = re.compile(r"/v2/models/([^/]+)(?:/versions/([^/]+))?/infer")


class InferEndpoint:
    """ASGI: POST /v2/models/{name}[/versions/{version}]/infer itself, every other
    request to `app` (see the module doc)."""

    def __init__(self, app, server: Server, max_body: int):
        self.app = app
        self.server = server
        self.max_body = max_body

    def _infer(self, body: bytes, header_length, name: str, version: str):
        req = parse_infer(body, header_length, name, version)
        return encode_infer(req, self.server.infer(req))

    async def __call__(self, scope, receive, send):
        route = INFER_PATH.fullmatch(scope["path"]) if scope["type"] == "http" else None
        if route is None:
            return await self.app(scope, receive, send)
        headers = [JSON_TYPE]
        try:
            if scope["method"] != "POST":
                headers.append((b"allow", b"POST"))
                raise ServingError(f"{scope['method']} {scope['path']}: the infer route takes POST", 405)
            body = await _body(receive, self.max_body)
            if body is None:
                return  # (nobody to answer)
            header_length = None
            for key, value in scope["headers"]:
                if key == HEADER_LENGTH_KEY:
                    header_length = value.decode("latin-1")
            # decoding, the request and encoding on one worker thread: a 60 MiB JSON body parsed on the event
            # loop stalled every route for seconds (health included), and one hop costs what two did
            data, header_length = await run_in_threadpool(self._infer, body, header_length, route.group(1),
                                                          route.group(2) or "")
            status = 200
            if header_length is not None:
                headers = [(b"content-type", b"application/octet-stream"),
                           (HEADER_LENGTH_KEY, str(header_length).encode())]
        except ServingError as exc:
            data, status = error_body(exc), exc.status
        except Exception as exc:  # noqa: BLE001 - a bug: logged with its traceback, the server goes on
            err = _internal(exc, scope["method"], scope["path"])
            data, status = error_body(err), err.status
        headers.append((b"content-length", str(len(data)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})


def make_app(server: Server, max_body: int) -> FastAPI:
    app = FastAPI(title="mo-core inference server", openapi_url=None, docs_url=None, redoc_url=None)

    async def framework_error(request: Request, exc: StarletteHTTPException) -> Response:
        # no such route (404) or method (405): the protocol's {"error": ...}, not FastAPI's {"detail": ...}
        what = {404: "no such route", 405: f"{request.method} is not served here"}.get(exc.status_code, exc.detail)
        headers = dict(exc.headers or {})
        return Response(orjson.dumps({"error": f"{request.method} {request.url.path}: {what}"}),
                        status_code=exc.status_code, media_type=JSON, headers=headers)
    app.add_exception_handler(StarletteHTTPException, framework_error)
    backend = server.backend

    def route(path: str, methods=("GET",)):
        def register(fn):
            async def handler(request: Request) -> Response:
                try:
                    return await fn(request, **request.path_params)
                except ServingError as exc:
                    return _error(exc)
                except Exception as exc:  # noqa: BLE001 - a bug: logged with its traceback, the server goes on
                    return _error(_internal(exc, request.method, request.url.path))
            app.add_api_route(path, handler, methods=list(methods), include_in_schema=False)
            return fn
        return register

    async def optional_json(request: Request) -> dict:
        body = await _body(request.receive, max_body)
        if body is None:
            raise bad_request("the client went away before its request body was all there")
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

    @route("/v2/models/stats")  # (before /v2/models/{name}: a model named so)
    @route("/v2/models/{name}/stats")
    @route("/v2/models/{name}/versions/{version}/stats")
    async def stats(request, name="", version=""):
        return _json({"model_stats": await run_in_threadpool(server.statistics, name, version)})

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
    """The app behind the infer endpoint, both behind the Guard (auth, body limit, access log)."""
    return Guard(InferEndpoint(app, server, max_body), server, max_body)
