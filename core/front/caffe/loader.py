"""Reads a Caffe .prototxt and .caffemodel with our own compiled caffe.proto.

No pycaffe here: the files are protobuf messages, parsed with the fast (upb)
protobuf backend. Errors name the file, line and field, FAQ style.
"""
from __future__ import annotations

import os
import re

from google.protobuf import text_format

from core.errors import FrameworkError

MAX_PROTOTXT_BYTES = 64 << 20      # topologies are small; a huge file is a mistake
MAX_CAFFEMODEL_BYTES = 2 << 30     # protobuf's own hard limit for one message

_PROTO_PATH = os.path.join(os.path.dirname(__file__), "proto", "mo_caffe.proto")


def caffe_pb2():
    try:
        from core.front.caffe.proto import mo_caffe_pb2
    except ImportError as exc:  # the schema is compiled at install time
        raise FrameworkError(
            "The compiled Caffe schema is missing ({}). Run scripts/compile_proto.sh (needs protoc) "
            "or re-run the set-up command of the README.", exc) from None
    return mo_caffe_pb2


def _read_bytes(path: str, what: str, limit: int) -> bytes:
    if not path:
        raise FrameworkError("Cannot find prototxt file: for Caffe please specify --input_proto - a protobuf file "
                             "that stores topology and --input_model that stores pretrained weights", faq=20)
    if not os.path.isfile(path):
        raise FrameworkError("The {} file '{}' does not exist. Check the path.", what, path,
                             faq=20 if what == "prototxt" else None)
    size = os.path.getsize(path)
    if size > limit:
        raise FrameworkError("The {} file '{}' is {} bytes, larger than the {} bytes a {} may have.",
                             what, path, size, limit, what)
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise FrameworkError("Cannot read the {} file '{}': {}", what, path, exc.strerror) from None


_NO_FIELD = re.compile(r'^(\d+):(\d+) : .*?Message type "([\w.]+)" has no field named "(\w+)"')
_LINE = re.compile(r"^(\d+):(\d+) : (.*)$", re.S)


def load_prototxt(path: str, net_class=None, schema_path: str | None = None):
    """Parses a text-format NetParameter (of our schema, or of `net_class` from the
    user's --caffe_proto `schema_path`); FAQ #1 / #11 style errors."""
    net_class = net_class or caffe_pb2().NetParameter
    raw = _read_bytes(path, "prototxt", MAX_PROTOTXT_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameworkError("Invalid prototxt file '{}': it is not text (is it a .caffemodel passed as "
                             "--input_proto?)", path, faq=11) from None
    net = net_class()
    try:
        text_format.Parse(text, net, allow_unknown_extension=False)
    except text_format.ParseError as exc:
        msg = str(exc)
        m = _NO_FIELD.match(msg)
        if m:
            line, col, msg_type, field = m.groups()
            if schema_path:
                raise FrameworkError(
                    'The Caffe schema {} (--caffe_proto) does not contain field "{}" (message {}), found in {} at '
                    "line {}, column {}. Give the schema the model was trained with.", schema_path, field, msg_type,
                    path, line, col, faq=1) from None
            raise FrameworkError(
                'Our caffe.proto (core/front/caffe/proto/mo_caffe.proto) does not contain field "{}" (message {}), '
                "found in {} at line {}, column {}.\n This field comes from a Caffe fork: convert with --caffe_proto "
                "FORK/caffe.proto (the fork's own schema), or remove it from the prototxt if it is not needed for "
                "inference.", field, msg_type, path, line, col, faq=1) from None
        m = _LINE.match(msg)
        where = "line {}, column {}".format(m.group(1), m.group(2)) if m else "unknown position"
        detail = m.group(3) if m else msg
        raise FrameworkError("Invalid prototxt file '{}' at {}: {}", path, where, detail, faq=11) from None
    if not net.layer and not getattr(net, "layers", None):
        raise FrameworkError("Invalid proto file '{}': there is neither 'layer' nor 'layers' top-level messages.",
                             path, faq=7)
    return net


def load_caffemodel(path: str):
    """{layer name: [Blob]} of the trained weights (see weights.py)."""
    from core.front.caffe.weights import read_caffemodel_blobs
    if not os.path.isfile(path or ""):
        raise FrameworkError("The caffemodel file '{}' does not exist. Check the path given with --input_model.", path)
    return read_caffemodel_blobs(path, MAX_CAFFEMODEL_BYTES)
