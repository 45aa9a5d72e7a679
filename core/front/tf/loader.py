"""Reads a frozen TensorFlow graph (.pb binary or .pbtxt text GraphDef) with our
own compiled schema (core/front/tf/proto/mo_tensorflow.proto): no TensorFlow here.

The binary form is parsed by protobuf's C (upb) backend in one call; constants
stay inside the parsed message and are later viewed as numpy arrays without a
per-value Python object (core/front/tf/tensors.py). Errors name the file and
say what to do, with the reference FAQ numbers (#42, #43).
"""
from __future__ import annotations

import os

from google.protobuf import message as pb_message
from google.protobuf import text_format

from core.errors import FrameworkError

MAX_GRAPH_BYTES = 2 << 30      # protobuf's own hard limit for one message
MAX_TEXT_GRAPH_BYTES = 2 << 30


def tf_pb2():
    try:
        from core.front.tf.proto import mo_tensorflow_pb2
    except ImportError as exc:  # the schema is compiled at install time
        raise FrameworkError(
            "The compiled TensorFlow graph schema is missing ({}). Run scripts/compile_proto.sh (needs protoc) "
            "or re-run the set-up command of the README.", exc) from None
    return mo_tensorflow_pb2


def _read(path: str, limit: int) -> bytes:
    if not path:
        raise FrameworkError("No TensorFlow model given: pass the frozen graph with --input_model model.pb.", faq=42)
    if os.path.isdir(path):
        raise FrameworkError("--input_model '{}' is a directory. For a SavedModel directory use --saved_model_dir; "
                             "--input_model takes a frozen graph file (.pb or .pbtxt).", path, faq=42)
    if not os.path.isfile(path):
        raise FrameworkError("Cannot read the model file '{}': it does not exist. Check the path given with "
                             "--input_model.", path, faq=42)
    size = os.path.getsize(path)
    if size > limit:
        raise FrameworkError("The model file '{}' is {} bytes, larger than the {} bytes a GraphDef may have.",
                             path, size, limit, faq=42)
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise FrameworkError("Cannot read the model file '{}': {}", path, exc.strerror, faq=42) from None


def _looks_like_text(raw: bytes) -> bool:
    text = raw[:4096].decode("utf-8", "ignore")  # (a cut multi-byte character is dropped)
    if not text.strip():
        return False
    # a binary GraphDef has length bytes below 0x20 early on; text has none
    return all(ch.isprintable() or ch in "\n\r\t" for ch in text)


def _is_saved_model(path: str) -> bool:
    """A SavedModel's saved_model.pb (next to its variables/ directory)."""
    return os.path.basename(path) == "saved_model.pb" or os.path.isdir(
        os.path.join(os.path.dirname(os.path.abspath(path)), "variables"))


def load_graph_def(path: str, is_text: bool = False):
    """The GraphDef of a frozen graph file."""
    pb2 = tf_pb2()
    graph = pb2.GraphDef()
    if is_text:
        raw = _read(path, MAX_TEXT_GRAPH_BYTES)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FrameworkError(
                "Cannot read the model file '{}' as a text GraphDef: it is not UTF-8 text. A binary .pb is read "
                "without --input_model_is_text.", path, faq=42) from None
        try:
            text_format.Parse(text, graph, allow_unknown_extension=False)
        except text_format.ParseError as exc:
            raise FrameworkError("Cannot read the model file '{}' as a text GraphDef: {}. It must be a frozen "
                                 "TensorFlow graph in the protobuf text format.", path, exc, faq=42) from None
        except RecursionError:  # (the text parser recurses once per nested message)
            raise FrameworkError("Cannot read the model file '{}' as a text GraphDef: its messages are nested too "
                                 "deeply to be a TensorFlow graph.", path, faq=42) from None
    else:
        raw = _read(path, MAX_GRAPH_BYTES)
        if _looks_like_text(raw):
            raise FrameworkError(
                "Cannot read the model file '{}': it is text, not a binary GraphDef. If it is a graph in the "
                "protobuf text format (.pbtxt), add --input_model_is_text.", path, faq=42)
        try:
            graph.ParseFromString(raw)
        except (pb_message.DecodeError, RuntimeError, ValueError) as exc:
            if _is_saved_model(path):
                raise FrameworkError("The model file '{}' is the graph file of a SavedModel, not a frozen graph: "
                                     "convert its directory with --saved_model_dir {}.", path,
                                     os.path.dirname(os.path.abspath(path)), faq=43) from None
            raise FrameworkError(
                "Cannot pre-process TensorFlow graph after reading from model file '{}': it is not a valid binary "
                "GraphDef ({}). The file is corrupt, truncated or has an unsupported format; a text graph needs "
                "--input_model_is_text.", path, exc, faq=43) from None
    if not graph.node:
        raise FrameworkError("The model file '{}' holds no graph nodes: it is not a frozen TensorFlow graph "
                             "(an empty file, a SavedModel's saved_model.pb needs --saved_model_dir).", path,
                             faq=43)
    return graph
