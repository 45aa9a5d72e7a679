"""The prototxt/caffemodel variants: deprecated V1 `layers` with `input_dim`, the
upb protobuf backend, FP16 output, and constant folding on a hand-made graph."""
import numpy as np
import pytest

from core.front.caffe.loader import caffe_pb2
from tests.caffe_models import make_caffemodel as make_own_caffemodel
from tests.support import convert_api, import_caffe, ir_shapes, write_text

V1_NET = """
name: "v1net"
input: "data"
input_dim: 2
input_dim: 3
input_dim: 12
input_dim: 12
layers { name: "conv1" type: CONVOLUTION bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 } }
layers { name: "relu1" type: RELU bottom: "conv1" top: "conv1" }
layers { name: "pool1" type: POOLING bottom: "conv1" top: "pool1" pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layers { name: "fc" type: INNER_PRODUCT bottom: "pool1" top: "fc" inner_product_param { num_output: 5 } }
layers { name: "prob" type: SOFTMAX bottom: "fc" top: "prob" }
"""


def test_v1_layers_without_pycaffe(tmp_path):
    """The same V1 net and caffemodel (V1 `layers` holding the blobs), shapes worked out by hand."""
    proto = write_text(str(tmp_path / "v1.prototxt"), V1_NET)
    weights = str(tmp_path / "v1.caffemodel")
    blobs = make_own_caffemodel(proto, weights, scale=1.0)
    network = convert_api(input_model=weights, input_proto=proto)
    # conv 3x3 stride 2 on 12: 5; AVE pool 2 stride 2 with Caffe's ceil: 3; fc to 5 outputs
    assert ir_shapes(network) == {"data": [(2, 3, 12, 12)], "conv1": [(2, 4, 5, 5)], "relu1": [(2, 4, 5, 5)],
                                  "pool1": [(2, 4, 3, 3)], "fc": [(2, 5)], "prob": [(2, 5)]}
    np.testing.assert_array_equal(network.layer_by_name("conv1").blobs["weights"], blobs["conv1"][0].ravel())
    np.testing.assert_array_equal(network.layer_by_name("fc").blobs["weights"], blobs["fc"][0].ravel())


@pytest.mark.pycaffe
def test_v1_layers_and_input_dim(tmp_path):
    caffe = import_caffe()
    proto = write_text(str(tmp_path / "v1.prototxt"), V1_NET)
    net = caffe.Net(proto, caffe.TEST)
    rng = np.random.default_rng(0)
    for blobs in net.params.values():
        for b in blobs:
            b.data[...] = rng.normal(size=b.data.shape)
    # a V1 caffemodel, written with our schema: `layers` entries holding the blobs
    pb2 = caffe_pb2()
    model = pb2.NetParameter(name="v1net")
    kinds = {"conv1": pb2.V1LayerParameter.CONVOLUTION, "fc": pb2.V1LayerParameter.INNER_PRODUCT}
    for name, blobs in net.params.items():
        layer = model.layers.add(name=name, type=kinds[name])
        for b in blobs:
            blob = layer.blobs.add()
            blob.num, blob.channels, blob.height, blob.width = ([1] * (4 - b.data.ndim)) + list(b.data.shape)
            blob.data.extend(b.data.ravel().tolist())
    weights = tmp_path / "v1.caffemodel"
    weights.write_bytes(model.SerializeToString())
    network = convert_api(input_model=str(weights), input_proto=proto)
    net.forward()
    ref = {name: [tuple(net.blobs[t].data.shape) for t in net.top_names[name]] for name in net._layer_names}
    ours = ir_shapes(network)
    assert ours.pop("data") == ref.pop("input") == [(2, 3, 12, 12)]  # pycaffe upgrades input_dim to a layer
    assert ours == ref
    conv = network.layer_by_name("conv1")
    np.testing.assert_array_equal(conv.blobs["weights"], net.params["conv1"][0].data.ravel())
    assert network.layer_by_name("pool1").data["pool-method"] == "avg"
    # one net-level input: --input_shape alone applies to it
    other = convert_api(input_model=str(weights), input_proto=proto, input_shape="[1,3,20,20]", output="relu1")
    assert other.layer_by_name("conv1").outputs[0].dims == (1, 4, 9, 9)


def test_fast_protobuf_backend():
    from google.protobuf.internal import api_implementation
    assert api_implementation.Type() == "upb"


def test_fp16_ir(own_models, tmp_path):
    """--data_type FP16 is a pipeline pass: the network convert() returns already holds
    float16 blobs and FP16 layers, and the writer writes what it says."""
    from ir import read_ir, write_ir
    proto, weights = own_models["bvlc_googlenet"]
    full = convert_api(input_model=weights, input_proto=proto)
    half = convert_api(input_model=weights, input_proto=proto, data_type="FP16")
    assert {layer.precision for layer in half.layers} == {"FP16"}
    assert {b.dtype for layer in half.layers for b in layer.blobs.values()} == {np.dtype(np.float16)}
    assert half.meta["cli_data_type"] == "FP16"
    for layer in full.layers:  # the same values, rounded to float16
        for name, blob in layer.blobs.items():
            assert np.array_equal(half.layer_by_name(layer.name).blobs[name], blob.astype(np.float16))
    write_ir(full, str(tmp_path / "fp32.xml"))
    write_ir(half, str(tmp_path / "fp16.xml"))
    a, b = read_ir(str(tmp_path / "fp32.xml")), read_ir(str(tmp_path / "fp16.xml"))
    assert all(layer.precision == "FP16" for layer in b.layers)
    assert (tmp_path / "fp16.bin").stat().st_size * 2 == (tmp_path / "fp32.bin").stat().st_size
    wa, wb = a.layer_by_name("conv1/7x7_s2").blobs["weights"], b.layer_by_name("conv1/7x7_s2").blobs["weights"]
    assert wb.dtype == np.float16
    np.testing.assert_allclose(wb.astype(np.float32), wa, rtol=1e-3, atol=1e-6)


def test_constant_folding_keeps_results_as_blobs():
    """A constant sub-graph feeding a blob port is computed at conversion time."""
    from core.graph.graph import Graph
    from core.middle.const_fold import fold_constants
    from core.ops.linear import ScaleShift
    from core.ops.shape_ops import Reshape
    g = Graph()
    const = g.add_const("w_src", np.arange(6, dtype=np.float32).reshape(2, 3))
    reshape = g.add_op("reshape")
    Reshape.update_node_stat(reshape, {"dim": [6]})
    g.connect(const, reshape, inp=0)
    folded = g.add_data("reshape")
    folded.shape = np.array([6])
    g.connect(reshape, folded, out=0)
    x = g.add_data("x", shape=[1, 6, 2, 2])
    ss = g.add_op("ss")
    ScaleShift.update_node_stat(ss, {})
    g.connect(x, ss, inp=0)
    g.connect(folded, ss, inp=1, bin="weights")
    fold_constants(g)
    assert g.op_by_name("reshape") is None
    assert ss.blob_inputs()[0][1].value.tolist() == [0, 1, 2, 3, 4, 5]
