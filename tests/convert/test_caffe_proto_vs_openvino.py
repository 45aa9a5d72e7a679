"""Our caffe.proto accepts at least what OpenVINO's `mo` (openvino-dev 2024.6) accepts.

Both schemas are compiled (with grpcio-tools' protoc) and walked field by field
from every root message (NetParameter, SolverParameter, ...) through the message
types their fields use: each field of theirs must exist in ours under the same
name, with the same scalar type, an enum with every value name, or a message that
passes the same check; repeated stays repeated. That is what decides whether a
prototxt written for `mo` parses with ours (text format goes by names).

Field numbers, defaults and message names may differ where our schema must keep
the Caffe sdist's (tests/convert/test_schema.py): they are listed in KNOWN with the
reason, and the test fails on any difference not listed (or listed but gone)."""
import os

import pytest
from google.protobuf import descriptor_pb2

from tests.support import REPO, descriptor_set

OURS = os.path.join(REPO, "core", "front", "caffe", "proto")

# (kind, message, field or enum value, theirs, ours): expected differences
KNOWN = {
    # LayerParameter: the sdist (BVLC + SSD + brocolli) numbers its fork parameters
    # differently; prototxts name them and our weights reader takes only blobs from
    # the .caffemodel, so numbers of parameter fields never meet a model file
    ("number", "LayerParameter", "ctc_decoder_param", 149, 225),
    ("number", "LayerParameter", "ctc_loss_param", 148, 226),
    ("number", "LayerParameter", "permute_param", 154, 202),
    ("number", "LayerParameter", "reverse_param", 147, 227),
    ("number", "LayerParameter", "proposal_param", 201, 1000),
    ("number", "LayerParameter", "cosine_similarity_batch_param", 202, 229),
    ("number", "LayerParameter", "rss_loss_param", 203, 230),
    ("number", "LayerParameter", "norm_param", 204, 206),
    ("number", "LayerParameter", "roi_warping_param", 205, 228),
    ("number", "LayerParameter", "psroi_pooling_param", 207, 149),
    ("number", "LayerParameter", "detection_output_param", 211, 204),
    ("number", "LayerParameter", "prior_box_param", 212, 203),
    ("number", "LayerParameter", "relu6_param", 216, 503),
    # mo's numbers are taken by the sdist's own fields in these messages
    ("number", "SolverParameter", "layer_wise_reduce", 41, 43),
    ("number", "SolverParameter", "plateau_winsize", 42, 44),
    ("number", "DetectionOutputParameter", "save_file", 12, 13),
    ("number", "DetectionOutputParameter", "input_width", 13, 17),
    ("number", "ReLU6Parameter", "n", 1, 3),
    ("number", "LossParameter.NormalizationMode", "PRE_FIXED", 3, 5),
    ("number", "LossParameter.NormalizationMode", "NONE", 4, 3),
    # SSD's data-transformer ResizeParameter: same fields, the sdist calls it
    # OldResizeParameter (its ResizeParameter is brocolli's Resize layer)
    ("type", "SaveOutputParameter", "resize_param", "ResizeParameter", "OldResizeParameter"),
    # defaults the sdist sets (our extractors read the strides with HasField; SSD's
    # PriorBox clips by default in the sdist's Caffe, which is the reference we run)
    ("default", "ConvolutionParameter", "stride_h", "", "1"),
    ("default", "ConvolutionParameter", "stride_w", "", "1"),
    ("default", "PriorBoxParameter", "clip", "false", "true"),
    ("default", "ShuffleChannelParameter", "group", "", "1"),
}


def mo_proto_dir() -> str:
    """mo's schema in the openvino-dev 2024.6 venv (benchmarks/references.py sets it up)."""
    import glob

    from benchmarks.references import openvino_python
    openvino_python()
    from benchmarks.references import OPENVINO_VENV
    found = glob.glob(os.path.join(OPENVINO_VENV, "lib", "python3*", "site-packages", "openvino", "tools", "mo",
                                   "front", "caffe", "proto", "mo_caffe.proto"))
    assert found, "openvino-dev's mo_caffe.proto is missing from " + OPENVINO_VENV
    return os.path.dirname(found[0])


def index(file_proto):
    """{full name without the package: DescriptorProto or EnumDescriptorProto}."""
    result = {}

    def walk(messages, prefix):
        for m in messages:
            result[prefix + m.name] = m
            for e in m.enum_type:
                result[prefix + m.name + "." + e.name] = e
            walk(m.nested_type, prefix + m.name + ".")
    walk(file_proto.message_type, "")
    for e in file_proto.enum_type:
        result[e.name] = e
    return result


def short(type_name, package):
    return type_name[len(package) + 2:] if type_name.startswith("." + package + ".") else type_name


def differences(theirs_file, ours_file):
    theirs, ours = index(theirs_file), index(ours_file)
    used = {short(f.type_name, theirs_file.package) for m in theirs.values()
            if isinstance(m, descriptor_pb2.DescriptorProto) for f in m.field if f.type_name}
    # NetParameter (what a prototxt is) and every message no other one uses
    roots = ["NetParameter"] + [n for n, m in theirs.items()
                                if isinstance(m, descriptor_pb2.DescriptorProto) and n not in used]
    problems, found, seen = [], set(), set()

    def enum(their_name, our_name):
        mine = {v.name: v.number for v in ours[our_name].value}
        for v in theirs[their_name].value:
            if v.name not in mine:
                problems.append("enum {} has no value {}".format(our_name, v.name))
            elif mine[v.name] != v.number:
                found.add(("number", our_name, v.name, v.number, mine[v.name]))

    def message(their_name, our_name):
        if (their_name, our_name) in seen:
            return
        seen.add((their_name, our_name))
        if our_name not in ours:
            problems.append("no message " + our_name)
            return
        mine = {f.name: f for f in ours[our_name].field}
        for f in theirs[their_name].field:
            g = mine.get(f.name)
            if g is None:
                problems.append("{} has no field {} (theirs: number {})".format(our_name, f.name, f.number))
                continue
            if g.type != f.type:
                problems.append("{}.{}: type {} here, {} in mo's".format(our_name, f.name, g.type, f.type))
                continue
            if f.label == f.LABEL_REPEATED and g.label != g.LABEL_REPEATED:
                problems.append("{}.{} is not repeated here".format(our_name, f.name))
            if g.number != f.number:
                found.add(("number", our_name, f.name, f.number, g.number))
            if g.default_value != f.default_value:
                found.add(("default", our_name, f.name, f.default_value, g.default_value))
            if f.type_name:
                t, o = short(f.type_name, theirs_file.package), short(g.type_name, ours_file.package)
                if t.rsplit(".", 1)[-1] != o.rsplit(".", 1)[-1]:
                    found.add(("type", our_name, f.name, t, o))
                (enum if f.type == f.TYPE_ENUM else message)(t, o)

    for root in roots:
        message(root, root)
    return problems, found


@pytest.mark.openvino_dev
def test_ours_accepts_every_field_of_openvino_mos_caffe_proto(tmp_path):
    theirs = descriptor_set(mo_proto_dir(), "mo_caffe.proto", str(tmp_path / "mo.pb"))
    ours = descriptor_set(OURS, "mo_caffe.proto", str(tmp_path / "ours.pb"))
    problems, found = differences(theirs, ours)
    assert problems == []
    assert sorted(found - KNOWN, key=str) == [], "differences not explained in KNOWN"
    assert sorted(KNOWN - found, key=str) == [], "KNOWN lists differences that are gone"


def test_an_openvino_style_prototxt_parses_with_ours():
    """Fields only forks have, as a prototxt written for `mo` uses them."""
    from google.protobuf import text_format

    from core.front.caffe.proto import mo_caffe_pb2
    net = text_format.Parse("""
layer { name: "d" type: "DetectionOutput"
  detection_output_param { num_classes: 2 normalized: false input_width: 600 input_height: 400
    objectness_score: 0.1 save_output_param { resize_param { resize_mode: FIT_SMALL_SIZE height_scale: 2 } } } }
layer { name: "r" type: "ReLU6" relu6_param { n: 6 } }
layer { name: "l" type: "SoftmaxWithLoss" loss_param { normalization: PRE_FIXED pre_fixed_normalizer: 2 } }
""", mo_caffe_pb2.NetParameter())
    assert net.layer[0].detection_output_param.input_width == 600 and net.layer[1].relu6_param.n == 6
