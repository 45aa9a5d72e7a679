"""Layers with no opset equivalent: one [ ERROR ] listing them all, exit 1, no files;
with --ov_extension_ops they become the named operations of an OpenVINO extension,
which the real runtime runs (here Python extension ops) equal to pycaffe.

The network is the reference guide's custom layer example: BNLL and Threshold come
from converter extensions, Reduction from CustomLayersMapping.xml with the Caffe
fallback (a Caffe-backed layer)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from ir import CAFFE_DEFINITION_ATTR, IRError
from ir.v11 import parse_extension_ops
from tests.ir_v11.ov_extension_ops import OPS
from tests.ir_v11.v11_helpers import F32, caffe_forward, import_openvino
from tests.support import REPO, import_caffe, make_caffemodel, run_cli

CUSTOM = os.path.join(REPO, "tests", "custom_layers")
REF_NET = os.path.join(CUSTOM, "reference_example.prototxt")
CONVERT = ["--input_proto", REF_NET, "-k", os.path.join(CUSTOM, "reference_mapping.xml"), "--use-caffe-fallback",
           "--extensions", os.path.join(CUSTOM, "example_ext"), "--ir_version", "11", "--model_name", "ref"]


@pytest.fixture(scope="module")
def ref_model(tmp_path_factory):
    weights = str(tmp_path_factory.mktemp("ref") / "ref.caffemodel")
    make_caffemodel(REF_NET, weights, scale=0.5, seed=4)  # fc values on both sides of the threshold
    return weights


def test_layers_without_opset_equivalent_are_one_error(ref_model, tmp_path):
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("convert", "--input_model", ref_model, "--output_dir", str(out), *CONVERT)
    assert code == 1, stdout + stderr
    assert "Traceback" not in stderr
    error = [line for line in stderr.splitlines() if line.startswith("[ ERROR ]")]
    assert len(error) == 1, stderr
    for text in ("cannot express 3 layer(s)", "'bnll' (BNLL)", "'reduce' (Reduction)", "'threshold' (Threshold)",
                 "--ov_extension_ops BNLL,Reduction,Threshold"):
        assert text in error[0], error[0]
    assert not out.exists() or os.listdir(out) == []


def test_extension_ops_run_on_openvino_equal_to_pycaffe(ref_model, tmp_path):
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("convert", "--input_model", ref_model, "--output_dir", str(out), *CONVERT,
                                   "--ov_extension_ops", "BNLL, Reduction=MeanReduce, Threshold@extension")
    assert code == 0, stdout + stderr
    assert "Generated IR version 11 model." in stdout
    ov = import_openvino()
    core = ov.Core()
    with pytest.raises(RuntimeError, match="BNLL"):  # a runtime without the extension cannot read it
        core.read_model(str(out / "ref.xml"))
    for op in OPS:
        core.add_extension(ov.OpExtension(op))
    compiled = core.compile_model(core.read_model(str(out / "ref.xml")), "CPU", F32)
    caffe = import_caffe()
    net = caffe.Net(REF_NET, ref_model, caffe.TEST)
    x = np.random.default_rng(2).standard_normal((2, 3, 8, 6)).astype(np.float32)
    ref = caffe_forward(net, {"data": x})
    ours = compiled({"input": x})
    assert ours["threshold"].shape == (2, 4)
    np.testing.assert_array_equal(ours["threshold"], ref["out"])
    assert 0 < ref["out"].sum() < ref["out"].size  # both sides of the threshold occur


def test_extension_op_gets_inputs_blobs_and_attributes(ref_model, tmp_path):
    """The written layer: the extension's type and version, the v2 attributes, the
    layer's blobs as constant inputs after its data inputs."""
    from core.pipeline import ConvertOptions, convert
    ctx = convert(ConvertOptions(input_model=ref_model, input_proto=REF_NET, ir_version=11,
                                 custom_layers_mapping=os.path.join(CUSTOM, "reference_mapping.xml"),
                                 use_caffe_fallback=True, extensions=os.path.join(CUSTOM, "example_ext"),
                                 ov_extension_ops="BNLL,Reduction=MeanReduce@my_opset,Threshold"))
    ops = {op.name: op for op in ctx.v11_model.ops}
    reduce = ops["reduce"]
    assert (reduce.type, reduce.version) == ("MeanReduce", "my_opset")
    # the v2 attributes as they are, without the Caffe-backed layer's own definition
    # (CAFFE_DEFINITION_ATTR: a matter of mo-core's daemons, not of the extension op)
    assert CAFFE_DEFINITION_ATTR in ctx.network.layer_by_name("reduce").data
    assert reduce.attrs == {"operation": "caffe.ReductionParameter.MEAN", "axis": "2", "coeff": "1"}
    assert [t.shape for t in reduce.inputs] == [(2, 3, 8, 6)] and reduce.outputs[0].shape == (2, 3)
    assert (ops["bnll"].type, ops["bnll"].version, ops["bnll"].attrs) == ("BNLL", "extension", {"beta": "1"})


@pytest.mark.parametrize("text,message", [
    ("BNLL=", "cannot read 'BNLL='"),
    ("BNLL@a@b", "cannot read 'BNLL@a@b'"),
    ("BN LL", "cannot read 'BN LL'"),
    ("BNLL,BNLL=X", "names the layer type 'BNLL' twice"),
])
def test_bad_extension_op_lists(text, message):
    with pytest.raises(IRError, match=message):
        parse_extension_ops(text)


def test_extension_ops_need_ir_version_11(ref_model, tmp_path):
    code, stdout, stderr = run_cli("convert", "--input_model", ref_model, "--input_proto", REF_NET,
                                   "--output_dir", str(tmp_path), "--ov_extension_ops", "BNLL")
    assert code == 1 and "add --ir_version 11" in stderr and "Traceback" not in stderr


def test_every_unmappable_layer_and_variant_is_listed():
    """A type with no opset operation and a variant with none, in one message."""
    from ir import Edge, Layer, Network, Port
    from ir.v11 import build_model
    s, small = (1, 3, 8, 8), (1, 3, 4, 4)
    layers = [Layer(0, "data", "Input", outputs=[Port(0, s)]),
              Layer(1, "down", "Resample", data={"type": "caffe.ResampleParameter.LINEAR", "antialias": "1",
                                                 "factor": "0.5"}, inputs=[Port(0, s)], outputs=[Port(1, small)]),
              Layer(2, "odd", "MyCustomOp", inputs=[Port(0, small)], outputs=[Port(1, small)]),
              Layer(3, "relu", "ReLU", inputs=[Port(0, small)], outputs=[Port(1, small)])]
    edges = [Edge(0, 0, 1, 0), Edge(1, 1, 2, 0), Edge(2, 1, 3, 0)]
    with pytest.raises(IRError) as err:
        build_model(Network("n", layers, edges))
    text = str(err.value)
    assert "cannot express 2 layer(s): 'down' (Resample: antialiased downscaling); 'odd' (MyCustomOp)" in text
    assert "--ov_extension_ops MyCustomOp,Resample" in text
