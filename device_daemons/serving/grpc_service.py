"""The gRPC front end: inference.GRPCInferenceService on grpcio (a thread pool
server: the backend calls block), with the messages of mo_inference.proto under
the protocol's service name. The bearer token, when set, is checked on every call
(`authorization` metadata) except the health ones, as on REST."""
from __future__ import annotations

import logging
import time
from concurrent import futures

import grpc

from .errors import ServingError, bad_request
from .frontend import Server
from .grpc_codec import encode_infer, parse_infer
from .proto import mo_inference_pb2 as pb

log = logging.getLogger("mo_core.serve")
SERVICE = "inference.GRPCInferenceService"
OPEN_METHODS = ("ServerLive", "ServerReady")


def _stats_message(entries: list[dict]) -> pb.ModelStatisticsResponse:
    msg = pb.ModelStatisticsResponse()
    for e in entries:
        s = msg.model_stats.add(name=e["name"], version=e["version"], last_inference=e["last_inference"],
                                inference_count=e["inference_count"], execution_count=e["execution_count"])
        for k, d in e["inference_stats"].items():
            getattr(s.inference_stats, k).CopyFrom(pb.StatisticDuration(count=d["count"], ns=d["ns"]))
        for b in e["batch_stats"]:
            row = s.batch_stats.add(batch_size=b["batch_size"])
            for k in ("compute_input", "compute_infer", "compute_output"):
                getattr(row, k).CopyFrom(pb.StatisticDuration(count=b[k]["count"], ns=b[k]["ns"]))
    return msg


def _metadata_message(doc: dict) -> pb.ModelMetadataResponse:
    msg = pb.ModelMetadataResponse(name=doc["name"], versions=doc["versions"], platform=doc["platform"])
    for key in ("inputs", "outputs"):
        for t in doc[key]:
            getattr(msg, key).add(name=t["name"], datatype=t["datatype"], shape=t["shape"])
    return msg


def _config_message(doc: dict) -> pb.ModelConfigResponse:
    """A model's configuration (ServedModel.model_config's dict, Triton's field names)
    as Triton's ModelConfig message."""
    msg = pb.ModelConfigResponse()
    c = msg.config
    c.name, c.platform, c.backend = doc["name"], doc["platform"], doc.get("backend", "")
    c.max_batch_size = doc.get("max_batch_size", 0)
    for key, field in (("input", c.input), ("output", c.output)):
        for t in doc.get(key, ()):
            field.add(name=t["name"], data_type=pb.DataType.Value(t["data_type"]), dims=t["dims"])
    for group in doc.get("instance_group", ()):
        c.instance_group.add(count=group["count"], kind=pb.ModelInstanceGroup.Kind.Value(group["kind"]))
    batching = doc.get("dynamic_batching")
    if batching is not None:
        c.dynamic_batching.max_queue_delay_microseconds = batching["max_queue_delay_microseconds"]
        c.dynamic_batching.preferred_batch_size.extend(batching.get("preferred_batch_size", ()))
    for key, value in doc.get("parameters", {}).items():
        c.parameters[key].string_value = value["string_value"]
    return msg


def _repository_parameters(req) -> None:
    unsupported = sorted(k for k in req.parameters if k == "config" or k.startswith("file:"))
    if unsupported:
        raise bad_request(f"load parameters {unsupported} are not supported: edit the model's config.json and "
                          f"files in the repository, then load it")


def handlers(server: Server) -> dict:
    """{method: (request type, response type, function(request) -> response)}."""
    backend = server.backend

    def infer(req):
        request = parse_infer(req)
        return encode_infer(request, server.infer(request))

    def index(req):
        msg = pb.RepositoryIndexResponse()
        for e in backend.index(req.ready):
            msg.models.add(name=e["name"], version=e.get("version", ""), state=e.get("state", ""),
                           reason=e.get("reason", ""))
        return msg

    def load(req):
        _repository_parameters(req)
        backend.load(req.model_name)
        return pb.RepositoryModelLoadResponse()

    def unload(req):
        backend.unload(req.model_name)
        return pb.RepositoryModelUnloadResponse()

    meta = server.metadata()
    return {
        "ServerLive": (pb.ServerLiveRequest, pb.ServerLiveResponse, lambda req: pb.ServerLiveResponse(live=True)),
        "ServerReady": (pb.ServerReadyRequest, pb.ServerReadyResponse,
                        lambda req: pb.ServerReadyResponse(ready=backend.ready())),
        "ModelReady": (pb.ModelReadyRequest, pb.ModelReadyResponse,
                       lambda req: pb.ModelReadyResponse(ready=backend.model_ready(req.name, req.version))),
        "ServerMetadata": (pb.ServerMetadataRequest, pb.ServerMetadataResponse,
                           lambda req: pb.ServerMetadataResponse(**meta)),
        "ModelMetadata": (pb.ModelMetadataRequest, pb.ModelMetadataResponse,
                          lambda req: _metadata_message(backend.metadata(req.name, req.version))),
        "ModelConfig": (pb.ModelConfigRequest, pb.ModelConfigResponse,
                        lambda req: _config_message(backend.model_config(req.name, req.version))),
        "ModelInfer": (pb.ModelInferRequest, pb.ModelInferResponse, infer),
        "ModelStatistics": (pb.ModelStatisticsRequest, pb.ModelStatisticsResponse,
                            lambda req: _stats_message(server.statistics(req.name, req.version))),
        "RepositoryIndex": (pb.RepositoryIndexRequest, pb.RepositoryIndexResponse, index),
        "RepositoryModelLoad": (pb.RepositoryModelLoadRequest, pb.RepositoryModelLoadResponse, load),
        "RepositoryModelUnload": (pb.RepositoryModelUnloadRequest, pb.RepositoryModelUnloadResponse, unload),
    }


def _wrap(server: Server, method: str, fn):
    what = f"/{SERVICE}/{method}"

    def call(request, context):
        t0 = time.perf_counter()
        status = "OK"
        try:
            if server.token is not None and method not in OPEN_METHODS:  # (the metadata read only for a token)
                auth = dict(context.invocation_metadata()).get("authorization")
                if not server.authorized(auth):
                    status = "UNAUTHENTICATED"
                    context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                  "missing or wrong bearer token (metadata authorization: Bearer TOKEN)")
            try:
                return fn(request)
            except ServingError as exc:
                status = exc.grpc_code.name
                context.abort(exc.grpc_code, exc.message)
            except Exception as exc:  # noqa: BLE001 - a bug: logged, the server goes on
                status = "INTERNAL"
                log.exception("internal error in %s", what)
                context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            if server.access_logging:  # (the peer and the message size only for a line that is written)
                name = getattr(request, "model_name", "") or getattr(request, "name", "")
                server.log_access(context.peer(), f"{what}{' ' + name if name else ''}", status,
                                  request.ByteSize() if method == "ModelInfer" else 0, t0)
    return call


def make_server(server: Server, address: str, max_message: int, threads: int = 32,
                tls: tuple[bytes, bytes] | None = None) -> tuple[grpc.Server, int]:
    """A started gRPC server on `address` (host:port; port 0 picks one) and its port."""
    options = [("grpc.max_receive_message_length", max_message), ("grpc.max_send_message_length", max_message),
               ("grpc.so_reuseport", 0)]
    g = grpc.server(futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"), options=options)
    methods = {name: grpc.unary_unary_rpc_method_handler(_wrap(server, name, fn),
                                                         request_deserializer=req.FromString,
                                                         response_serializer=resp.SerializeToString)
               for name, (req, resp, fn) in handlers(server).items()}
    g.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, methods),))
    if tls is not None:
        port = g.add_secure_port(address, grpc.ssl_server_credentials([(tls[1], tls[0])]))
    else:
        port = g.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot bind the gRPC port {address}")
    g.start()
    return g, port
