"""--caffe_proto: a Caffe fork's own schema, compiled at run time (grpcio-tools'
protoc), reads a model with a field no public schema has (the `sync_bn_param` of
a fork's "SyncBN" layer); the field reaches extension extractors and
CustomLayersMapping rules like any other."""
import os
import textwrap

import numpy as np
import pytest

from core.errors import Error
from core.front.caffe.user_proto import load_schema
from tests.caffe_models import make_caffemodel
from tests.support import REPO, assert_clean_failure, convert_api, run_cli, write_text

OUR_SCHEMA = os.path.join(REPO, "core", "front", "caffe", "proto", "mo_caffe.proto")
NET = """name: "fork"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 6 dim: 6 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "bn" type: "SyncBN" bottom: "conv" top: "bn"
  sync_bn_param { bn_mode: INFERENCE eps: 0.002 momentum: 0.9 } }
layer { name: "relu" type: "ReLU" bottom: "bn" top: "bn" }
"""
# the extension that gives "SyncBN" an op (shape) and an extractor that reads the fork's field
BN_OP = textwrap.dedent("""\
    from core.ops.op import Op, copy_shape_infer

    class SyncBN(Op):
        op = "SyncBN"

        def __init__(self, graph, attrs):
            super().__init__(graph, {"type": "SyncBN", "op": self.op, "infer": copy_shape_infer}, attrs)

        def supported_attrs(self):
            return ["eps", "mode"]
    """)
BN_EXTRACTOR = textwrap.dedent("""\
    from core.front.extractor import FrontExtractorOp
    from core.ops.op import Op

    class SyncBNExtractor(FrontExtractorOp):
        op = "SyncBN"

        @staticmethod
        def extract(node):
            p = node.pb.sync_bn_param  # a field only the fork's schema has
            mode = p.DESCRIPTOR.fields_by_name["bn_mode"].enum_type.values_by_number[p.bn_mode].name
            Op.get_op_class_by_name("SyncBN").update_node_stat(node, {"eps": p.eps, "mode": mode})
            return True
    """)


@pytest.fixture(scope="module")
def fork(tmp_path_factory):
    """A fork's caffe.proto (ours, as package caffe, plus a sync_bn_param), a prototxt that
    uses it, a caffemodel, and an extension directory for the SyncBN layer."""
    d = tmp_path_factory.mktemp("fork")
    schema = open(OUR_SCHEMA).read().replace("package mo_caffe;", "package caffe;").replace(".mo_caffe.", ".caffe.")
    schema = schema.replace("message LayerParameter {",
                            "message LayerParameter {\n  optional SyncBNParameter sync_bn_param = 4137;", 1)
    schema += textwrap.dedent("""
        message SyncBNParameter {
          enum BNMode { LEARN = 0; INFERENCE = 1; }
          optional BNMode bn_mode = 3 [default = LEARN];
          optional float eps = 4 [default = 1e-5];
          optional float momentum = 5 [default = 0.9];
        }
        """)
    (d / "fork").mkdir()
    proto = write_text(str(d / "fork" / "caffe.proto"), schema)
    prototxt = write_text(str(d / "fork.prototxt"), NET)
    weights = str(d / "fork.caffemodel")
    scale = np.linspace(0.5, 2, 4).astype(np.float32).reshape(1, 4, 1, 1)
    make_caffemodel(prototxt, weights, net_class=load_schema(proto),
                    blobs={"bn": [scale, -scale, scale / 10, scale + 1]})
    ext = d / "ext"
    (ext / "ops").mkdir(parents=True)
    (ext / "front" / "caffe").mkdir(parents=True)
    write_text(str(ext / "ops" / "bn.py"), BN_OP)
    write_text(str(ext / "front" / "caffe" / "bn_ext.py"), BN_EXTRACTOR)
    return {"proto": proto, "prototxt": prototxt, "weights": weights, "ext": str(ext), "dir": d}


def test_without_the_fork_schema_the_field_is_a_clear_error(fork, tmp_path):
    res = run_cli("convert", "--input_model", fork["weights"], "--input_proto", fork["prototxt"],
                  "--output_dir", str(tmp_path / "out"))
    assert_clean_failure(*res, tmp_path / "out", '"sync_bn_param"', "line 5", "--caffe_proto", "#1")


def test_an_extension_extractor_reads_the_fork_field(fork):
    net = convert_api(input_model=fork["weights"], input_proto=fork["prototxt"], caffe_proto=fork["proto"],
                      extensions=fork["ext"])
    bn = net.layer_by_name("bn")
    assert bn.type == "SyncBN" and bn.data == {"eps": "0.002", "mode": "INFERENCE"}
    assert bn.outputs[0].dims == (1, 4, 4, 4)


def test_a_mapping_rule_writes_the_fork_parameters(fork, tmp_path):
    mapping = write_text(str(tmp_path / "m.xml"), '<CustomLayersMapping><CustomLayer NativeType="SyncBN" '
                                                  'hasParam="true" protoParamName="sync_bn_param"/>'
                                                  '</CustomLayersMapping>')
    net = convert_api(input_model=fork["weights"], input_proto=fork["prototxt"], caffe_proto=fork["proto"],
                      custom_layers_mapping=mapping, extensions=fork["ext"])
    bn = net.layer_by_name("bn")
    # the layer carries its own definition (the self-contained IR), fork field included
    definition = bn.data.pop("caffe-prototxt")
    assert definition.startswith('layer { name: "bn" type: "SyncBN"') and "sync_bn_param {" in definition
    assert bn.data == {"bn_mode": "caffe.SyncBNParameter.INFERENCE", "eps": "0.002", "momentum": "0.9"}
    assert list(bn.blobs) == ["weights", "biases", "custom_2", "custom_3"]
    np.testing.assert_array_equal(bn.blobs["custom_3"], np.linspace(0.5, 2, 4).astype(np.float32) + 1)


def test_through_the_cli(fork, tmp_path):
    code, out, err = run_cli("convert", "--input_model", fork["weights"], "--input_proto", fork["prototxt"],
                             "--caffe_proto", fork["proto"], "--extensions", fork["ext"], "--output_dir",
                             str(tmp_path / "out"))
    assert code == 0, err
    assert "caffe_proto:" in out and os.path.isfile(tmp_path / "out" / "fork.xml")


@pytest.mark.parametrize("schema, needle", [
    ("syntax = \"proto2\";\nmessage NetParameter { optional string name = 1; ", "protoc cannot compile"),
    ("syntax = \"proto2\";\npackage x;\nmessage Foo { optional int32 a = 1; }\n", "has no message NetParameter"),
    ("syntax = \"proto2\";\nmessage LayerParameter { optional string name = 1; repeated bytes blobs = 9; }\n"
     "message NetParameter { repeated LayerParameter layer = 100; }\n", "LayerParameter.type must be field 2"),
])
def test_bad_schemas_are_clear_errors(fork, tmp_path, schema, needle):
    path = write_text(str(tmp_path / "bad.proto"), schema)
    with pytest.raises(Error, match=needle):
        convert_api(input_model=fork["weights"], input_proto=fork["prototxt"], caffe_proto=path)
