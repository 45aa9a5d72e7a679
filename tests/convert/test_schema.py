"""Our caffe.proto (core/front/caffe/proto/mo_caffe.proto) is the file format, so
every message, field number, label, type and default of the Caffe sdist's
caffe.proto must be in it unchanged (fork additions come on top)."""
import os

from google.protobuf import descriptor_pb2

from tests.support import REPO, SDIST, descriptor_set

OURS = os.path.join(REPO, "core", "front", "caffe", "proto")
THEIRS = os.path.join(SDIST, "src", "caffe", "proto")


def messages(file_proto):
    """{dotted name without the package: DescriptorProto}, nested ones included."""
    result = {}

    def walk(msgs, prefix):
        for m in msgs:
            result[prefix + m.name] = m
            walk(m.nested_type, prefix + m.name + ".")
    walk(file_proto.message_type, "")
    return result


def enums(file_proto):
    result = {e.name: e for e in file_proto.enum_type}
    for name, m in messages(file_proto).items():
        for e in m.enum_type:
            result[name + "." + e.name] = e
    return result


def strip_package(type_name, package):
    return type_name.replace("." + package + ".", ".") if type_name else ""


def test_schema_keeps_every_caffe_field(tmp_path):
    assert os.path.isfile(os.path.join(THEIRS, "caffe.proto")), "the Caffe sdist is missing: run ./run test"
    theirs = descriptor_set(THEIRS, "caffe.proto", str(tmp_path / "theirs.pb"))
    ours = descriptor_set(OURS, "mo_caffe.proto", str(tmp_path / "ours.pb"))
    assert ours.package == "mo_caffe"  # not "caffe": pycaffe's own classes may share the process
    our_msgs, problems = messages(ours), []
    for name, ref in messages(theirs).items():
        mine = our_msgs.get(name)
        if mine is None:
            problems.append("missing message " + name)
            continue
        fields = {f.number: f for f in mine.field}
        for f in ref.field:
            g = fields.get(f.number)
            if g is None:
                problems.append("{}: field {} ({}) missing".format(name, f.number, f.name))
                continue
            got = (g.name, g.label, g.type, strip_package(g.type_name, "mo_caffe"), g.default_value)
            want = (f.name, f.label, f.type, strip_package(f.type_name, "caffe"), f.default_value)
            if got != want:
                problems.append("{}.{}: ours {} vs Caffe's {}".format(name, f.name, got, want))
    our_enums = enums(ours)
    for name, ref in enums(theirs).items():
        mine = {v.name: v.number for v in our_enums[name].value} if name in our_enums else {}
        for v in ref.value:
            if mine.get(v.name) != v.number:
                problems.append("enum {} value {}".format(name, v.name))
    assert problems == []
    assert len(messages(theirs)) > 90
