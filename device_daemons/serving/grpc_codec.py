"""The gRPC forms of an inference request and response (ModelInferRequest /
ModelInferResponse of mo_inference.proto): raw_input_contents / raw_output_contents,
or the typed `contents` fields."""
from __future__ import annotations

import math

import numpy as np

from .errors import bad_request
from .protocol import InferRequest, InferResponse
from .proto import mo_inference_pb2 as pb
from .tensors import check_shape, datatype_of, dtype_of, from_bytes, to_bytes

# datatype -> the InferTensorContents field that carries it (FP16 has none: raw only)
CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
            "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
            "UINT32": "uint_contents", "UINT64": "uint64_contents", "FP32": "fp32_contents",
            "FP64": "fp64_contents"}


def _param(p) -> object:
    kind = p.WhichOneof("parameter_choice")
    return getattr(p, kind) if kind else None


def parse_infer(msg: pb.ModelInferRequest) -> InferRequest:
    if not msg.model_name:
        raise bad_request("ModelInferRequest.model_name is empty")
    if not msg.inputs:
        raise bad_request("the request has no inputs")
    raw = list(msg.raw_input_contents)
    if raw and len(raw) != len(msg.inputs):
        raise bad_request(f"{len(raw)} raw_input_contents for {len(msg.inputs)} inputs: give one per input, in order")
    decoded = {}
    for i, tensor in enumerate(msg.inputs):
        what = f"input '{tensor.name}'" if tensor.name else f"input {i}"
        if not tensor.name:
            raise bad_request(f"{what}: 'name' is empty")
        if tensor.name in decoded:
            raise bad_request(f"{what} is given twice")
        shape = check_shape(list(tensor.shape), what)
        if raw:
            decoded[tensor.name] = from_bytes(raw[i], tensor.datatype, shape, what)
            continue
        dtype = dtype_of(tensor.datatype, what)
        field = CONTENTS.get(tensor.datatype)
        if field is None:
            raise bad_request(f"{what}: {tensor.datatype} travels in raw_input_contents only")
        values = getattr(tensor.contents, field)
        expected = math.prod(shape)
        if len(values) != expected:
            raise bad_request(f"{what}: contents.{field} holds {len(values)} values but shape {list(shape)} "
                              f"needs {expected}")
        arr = np.array(values, dtype=np.float64 if dtype.kind == "f" else None)
        if dtype.kind in "iu" and arr.size and (arr.min() < np.iinfo(dtype).min or arr.max() > np.iinfo(dtype).max):
            raise bad_request(f"{what}: a value is out of the range of {tensor.datatype}")
        decoded[tensor.name] = arr.astype(dtype).reshape(shape)
    outputs = [o.name for o in msg.outputs] or None
    for o in msg.outputs:
        if "classification" in o.parameters and _param(o.parameters["classification"]):
            raise bad_request(f"output '{o.name}': the classification extension is not supported")
    return InferRequest(msg.model_name, msg.model_version, decoded, outputs, msg.id, raw=bool(raw))


def encode_infer(request: InferRequest, response: InferResponse) -> pb.ModelInferResponse:
    msg = pb.ModelInferResponse(model_name=response.model, model_version=response.version, id=response.id)
    raw = request.raw or any(datatype_of(v.dtype) not in CONTENTS for v in response.outputs.values())
    for name, value in response.outputs.items():
        datatype = datatype_of(value.dtype)
        out = msg.outputs.add(name=name, datatype=datatype, shape=list(value.shape))
        if raw:  # (all outputs or none: the protocol does not mix the two forms)
            msg.raw_output_contents.append(to_bytes(value))
        else:
            getattr(out.contents, CONTENTS[datatype]).extend(value.reshape(-1).tolist())
    return msg
