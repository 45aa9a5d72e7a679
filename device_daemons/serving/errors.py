"""Errors a request is answered with: the protocol's {"error": "..."} body, an HTTP
status and the matching gRPC code."""
from __future__ import annotations

import grpc

GRPC_CODES = {400: grpc.StatusCode.INVALID_ARGUMENT, 401: grpc.StatusCode.UNAUTHENTICATED,
              404: grpc.StatusCode.NOT_FOUND, 413: grpc.StatusCode.RESOURCE_EXHAUSTED,
              415: grpc.StatusCode.INVALID_ARGUMENT, 503: grpc.StatusCode.UNAVAILABLE,
              500: grpc.StatusCode.INTERNAL}


class ServingError(Exception):
    """A request that fails with `status` (HTTP) and `message` (what is wrong and
    where); `reason` labels the failure metric (Triton: REJECTED, BACKEND, OTHER)."""

    def __init__(self, message: str, status: int = 400, reason: str = "REJECTED"):
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason

    @property
    def grpc_code(self) -> grpc.StatusCode:
        return GRPC_CODES.get(self.status, grpc.StatusCode.UNKNOWN)


def bad_request(message: str) -> ServingError:
    return ServingError(message, 400)


def not_found(message: str) -> ServingError:
    return ServingError(message, 404)


def unavailable(message: str) -> ServingError:
    return ServingError(message, 503, "OTHER")
