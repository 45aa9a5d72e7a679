"""The REST forms of an inference request and response: JSON tensors, and the
binary-tensor extension (a JSON header of `Inference-Header-Content-Length` bytes,
then each binary tensor's bytes in order, sized by its `binary_data_size`).

Non-finite floats travel as the tokens NaN, Infinity and -Infinity, as Triton reads
and writes them (strict JSON has no such numbers; Python's json, tritonclient's
parser, reads them)."""
from __future__ import annotations

import json

import orjson
import numpy as np

from .errors import ServingError, bad_request
from .protocol import InferRequest, InferResponse
from .tensors import check_shape, datatype_of, from_bytes, from_json, to_bytes

HEADER_LENGTH = "inference-header-content-length"


def _object(value, what: str) -> dict:
    if not isinstance(value, dict):
        raise bad_request(f"{what} must be a JSON object")
    return value


def _parameters(value, what: str) -> dict:
    return _object(value if value is not None else {}, f"{what} 'parameters'")


def _flag(params: dict, key: str, what: str) -> bool | None:
    value = params.get(key)
    if value is not None and not isinstance(value, bool):
        raise bad_request(f"{what}: the parameter '{key}' must be true or false, got {value!r}"[:200])
    return value


def loads(data: bytes):
    """A JSON document of a request; NaN and (-)Infinity read as numbers (module doc)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        error = exc
    if b"NaN" in data or b"Infinity" in data:  # (orjson reads strict JSON only: Python's json reads these)
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            pass
    raise bad_request(f"the request body is not valid JSON: {error}")


def parse_infer(body: bytes, header_length: str | None, model: str, version: str) -> InferRequest:
    if header_length is not None:
        try:
            n = int(header_length)
        except ValueError:
            n = -1
        if not 0 < n <= len(body):
            raise bad_request(f"Inference-Header-Content-Length {header_length!r} must be a byte count from 1 to "
                              f"the body's {len(body)}")
        header, blobs = body[:n], memoryview(body)[n:]
    else:
        header, blobs = body, memoryview(b"")
    doc = _object(loads(header), "the request body")
    inputs = doc.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise bad_request("the request needs 'inputs': a non-empty list of tensors")
    request_id = doc.get("id", "")
    if not isinstance(request_id, str):
        raise bad_request("'id' must be a string")
    params = _parameters(doc.get("parameters"), "the request")
    decoded = {}
    offset = 0
    for i, item in enumerate(inputs):
        what = f"input {i}"
        _object(item, what)
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise bad_request(f"{what}: 'name' must be a non-empty string")
        what = f"input '{name}'"
        if name in decoded:
            raise bad_request(f"{what} is given twice")
        datatype = item.get("datatype")
        if not isinstance(datatype, str):
            raise bad_request(f"{what}: 'datatype' must be a string such as \"FP32\"")
        shape = check_shape(item.get("shape"), what)
        size = _parameters(item.get("parameters"), what).get("binary_data_size")
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, int) or size < 0 or offset + size > len(blobs):
                raise bad_request(f"{what}: binary_data_size {size!r} runs past the {len(blobs)} bytes after the "
                                  f"JSON header (Inference-Header-Content-Length)")
            decoded[name] = from_bytes(blobs[offset:offset + size], datatype, shape, what)
            offset += size
        elif "data" in item:
            decoded[name] = from_json(item["data"], datatype, shape, what)
        else:
            raise bad_request(f"{what} has neither 'data' nor a 'binary_data_size' parameter")
    if offset != len(blobs):
        raise bad_request(f"{len(blobs) - offset} bytes after the JSON header belong to no input's binary_data_size")
    outputs, binary = None, {}
    if doc.get("outputs") is not None:
        if not isinstance(doc["outputs"], list):
            raise bad_request("'outputs' must be a list of {\"name\": ...} objects")
        outputs = []
        for i, item in enumerate(doc["outputs"]):
            _object(item, f"output {i}")
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise bad_request(f"output {i}: 'name' must be a non-empty string")
            p = _parameters(item.get("parameters"), f"output '{name}'")
            if p.get("classification"):
                raise bad_request(f"output '{name}': the classification extension is not supported")
            if _flag(p, "binary_data", f"output '{name}'") is not None:
                binary[name] = p["binary_data"]
            outputs.append(name)
    return InferRequest(model, version, decoded, outputs, request_id, binary,
                        bool(_flag(params, "binary_data_output", "the request")))


def encode_infer(request: InferRequest, response: InferResponse) -> tuple[bytes, int | None]:
    """(body, JSON header length when binary tensors follow it, else None)."""
    described, blobs = [], []
    for name, value in response.outputs.items():
        entry = {"name": name, "datatype": datatype_of(value.dtype), "shape": list(value.shape)}
        if request.binary.get(name, request.binary_default):
            data = to_bytes(value)
            entry["parameters"] = {"binary_data_size": len(data)}
            blobs.append(data)
        else:
            flat = np.ascontiguousarray(value).reshape(-1)
            if flat.dtype.kind == "f" and not np.isfinite(flat).all():
                entry["data"] = orjson.Fragment(json.dumps(flat.tolist()))  # (orjson would write null)
            else:
                entry["data"] = flat.astype(np.float32) if flat.dtype == np.float16 else flat
        described.append(entry)
    doc = {"model_name": response.model, "model_version": response.version, "outputs": described}
    if response.id:
        doc["id"] = response.id
    header = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
    if not blobs:
        return header, None
    return b"".join([header, *blobs]), len(header)


def error_body(exc: ServingError) -> bytes:
    return orjson.dumps({"error": exc.message})
