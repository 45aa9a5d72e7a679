"""--caffe_proto my_caffe.proto: read a model with a Caffe fork's own schema.

A fork's prototxt may use fields no public schema has (e.g. a `bn_param`); the
reference's workaround was a hand-patched, hand-compiled parser. Here the user's
.proto is compiled at run time with the protoc that grpcio-tools ships (no system
protoc), into a descriptor set: no generated Python is written or imported, the
message classes come from a descriptor pool of their own (so the fork's `caffe`
package never clashes with ours or with pycaffe's). Extractors and
CustomLayersMapping rules then read the fork's fields like any other.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from core.errors import FrameworkError

MAX_PROTO_BYTES = 4 << 20
PROTOC_TIMEOUT = 120
# LayerParameter / NetParameter fields mo-core reads by number (core/front/caffe/weights.py
# reads the .caffemodel's wire format) or needs by name; a fork schema must keep them.
_NEEDED = {
    "NetParameter": {"layer": 100},
    "LayerParameter": {"name": 1, "type": 2, "bottom": 3, "top": 4, "blobs": 7},
}


def run_protoc(args: list[str], what: str = "the schema") -> None:
    """Runs grpcio-tools' protoc (with its bundled well-known .proto files); a
    failure is a FrameworkError with protoc's own message."""
    try:
        import grpc_tools
    except ImportError:
        raise FrameworkError("--caffe_proto needs a protoc: install grpcio-tools (pip install grpcio-tools; it "
                             "ships one, no system protoc is needed).") from None
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    cmd = [sys.executable, "-m", "grpc_tools.protoc", "--proto_path=" + include, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PROTOC_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise FrameworkError("protoc did not finish compiling {} within {} s.", what, PROTOC_TIMEOUT) from None
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip().splitlines()
        raise FrameworkError("protoc cannot compile {}:\n{}", what, "\n".join(message[:10]))


def load_schema(path: str):
    """The NetParameter message class of the user's caffe.proto."""
    if not os.path.isfile(path or ""):
        raise FrameworkError("The Caffe schema '{}' given with --caffe_proto does not exist.", path)
    if os.path.getsize(path) > MAX_PROTO_BYTES:
        raise FrameworkError("The Caffe schema '{}' is larger than {} bytes.", path, MAX_PROTO_BYTES)
    path = os.path.abspath(path)
    with tempfile.TemporaryDirectory(prefix="mo-core-proto-") as tmp:
        out = os.path.join(tmp, "schema.pb")
        run_protoc(["--proto_path=" + os.path.dirname(path), "--include_imports", "--descriptor_set_out=" + out,
                    os.path.basename(path)], what="'{}'".format(path))
        files = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            files.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file_proto in files.file:
        pool.Add(file_proto)
    main = files.file[-1]  # --include_imports lists dependencies first
    prefix = main.package + "." if main.package else ""
    try:
        net = pool.FindMessageTypeByName(prefix + "NetParameter")
    except KeyError:
        raise FrameworkError("The Caffe schema '{}' has no message NetParameter (package '{}'): is it a "
                             "caffe.proto?", path, main.package) from None
    _check_layout(net, path)
    return _message_class(net)


def _check_layout(net, path):
    layer = net.fields_by_name.get("layer")
    messages = {"NetParameter": net, "LayerParameter": layer.message_type if layer is not None else None}
    for message, fields in _NEEDED.items():
        descriptor = messages[message]
        for name, number in fields.items():
            field = descriptor.fields_by_name.get(name) if descriptor is not None else None
            if field is None or field.number != number:
                raise FrameworkError("The Caffe schema '{}': {}.{} must be field {} as in BVLC Caffe (mo-core reads "
                                     "the .caffemodel by these numbers).", path, message, name, number)


def _message_class(descriptor):
    get = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
    if get is not None:
        return get(descriptor)
    return message_factory.MessageFactory(descriptor.file.pool).GetPrototype(descriptor)
