"""Our GraphDef schema (core/front/tf/proto/mo_tensorflow.proto) has every message,
field and enum value of TensorFlow's own files with the same numbers, types and
labels, so binary and text graphs read the same. TensorFlow's descriptors are
dumped by a subprocess (TensorFlow never loads into the test process)."""
import json
import os
import subprocess
import sys

from tests.support import REPO

DUMP = r'''
import json, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
from tensorflow.core.framework import (attr_value_pb2, full_type_pb2, function_pb2, graph_debug_info_pb2, graph_pb2,
    node_def_pb2, op_def_pb2, resource_handle_pb2, tensor_pb2, tensor_shape_pb2, types_pb2, versions_pb2)
from google.protobuf import descriptor_pb2
messages, enums = {}, {}
def short(name):
    return name.split(".")[-1] if name else ""
def walk(msg, prefix):
    name = prefix + msg.name
    messages[name] = {f.name: [f.number, f.type, f.label, short(f.type_name)] for f in msg.field}
    for nested in msg.nested_type:
        walk(nested, name + ".")
    for e in msg.enum_type:
        enums[name + "." + e.name] = {v.name: v.number for v in e.value}
for module in (attr_value_pb2, full_type_pb2, function_pb2, graph_debug_info_pb2, graph_pb2, node_def_pb2,
               op_def_pb2, resource_handle_pb2, tensor_pb2, tensor_shape_pb2, types_pb2, versions_pb2):
    fd = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(fd)
    for msg in fd.message_type:
        walk(msg, "")
    for e in fd.enum_type:
        enums[e.name] = {v.name: v.number for v in e.value}
print(json.dumps({"messages": messages, "enums": enums}))
'''


def ours():
    from google.protobuf import descriptor_pb2

    from core.front.tf.loader import tf_pb2
    fd = descriptor_pb2.FileDescriptorProto()
    tf_pb2().DESCRIPTOR.CopyToProto(fd)
    messages, enums = {}, {}

    def walk(msg, prefix):
        name = prefix + msg.name
        messages[name] = {f.name: [f.number, f.type, f.label, f.type_name.split(".")[-1] if f.type_name else ""]
                          for f in msg.field}
        for nested in msg.nested_type:
            walk(nested, name + ".")
        for e in msg.enum_type:
            enums[name + "." + e.name] = {v.name: v.number for v in e.value}
    for msg in fd.message_type:
        walk(msg, "")
    for e in fd.enum_type:
        enums[e.name] = {v.name: v.number for v in e.value}
    return fd, messages, enums


def test_every_tensorflow_field_is_ours_with_the_same_number_and_type():
    proc = subprocess.run([sys.executable, "-c", DUMP], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    fd, messages, enums = ours()
    assert fd.package == "mo_tensorflow"
    missing = sorted(set(theirs["messages"]) - set(messages))
    assert missing == [], missing
    for name, fields in theirs["messages"].items():
        assert messages[name] == fields, name
    for name, values in theirs["enums"].items():
        assert enums.get(name) == values, name
