"""The sdist's real deploy nets convert, and every IR output shape equals
pycaffe's blob shape (and, with no framework at all, the shape Caffe's rules give
in tests/caffe_models.py), at batch 1 and 4."""
import pytest

from tests.caffe_models import read_net, top_shapes
from tests.support import BVLC, convert_api, import_caffe, ir_shapes


def pycaffe_top_shapes(proto, weights, batch):
    caffe = import_caffe()
    net = caffe.Net(proto, weights, caffe.TEST)
    for name in net.inputs:
        shape = list(net.blobs[name].data.shape)
        shape[0] = batch
        net.blobs[name].reshape(*shape)
    net.reshape()
    shapes = {layer: [tuple(net.blobs[top].data.shape) for top in net.top_names[layer]] for layer in net._layer_names}
    types = {name: layer.type for name, layer in zip(net._layer_names, net.layers)}
    return shapes, types


@pytest.mark.pycaffe
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("model", BVLC)
def test_bvlc_shapes_equal_pycaffe(bvlc_models, model, batch, tmp_path):
    proto, weights = bvlc_models[model]
    network = convert_api(input_model=weights, input_proto=proto, output_dir=str(tmp_path), batch=batch)
    ours = ir_shapes(network)
    ref, ref_types = pycaffe_top_shapes(proto, weights, batch)
    assert network.batch == batch
    compared = 0
    for layer in network.layers:
        assert layer.name in ref, "IR layer {} is not a Caffe layer".format(layer.name)
        assert ours[layer.name] == ref[layer.name], layer.name
        compared += 1
    assert compared > 10
    types = {layer.type for layer in network.layers}
    assert "Dropout" not in types and "Identity" not in types
    assert not any("drop" in layer.name for layer in network.layers)
    # every Caffe layer but Dropout and pycaffe's own Split copies is in the IR
    kept = {layer.name for layer in network.layers}
    missing = [name for name in ref if name not in kept and ref_types[name] not in ("Dropout", "Split")]
    assert missing == [], missing


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("model", BVLC)
def test_bvlc_shapes_follow_caffes_rules(own_models, model, batch):
    proto, weights = own_models[model]
    network = convert_api(input_model=weights, input_proto=proto, batch=batch)
    net = read_net(proto)
    for layer in net.layer:
        if layer.type == "Input":
            layer.input_param.shape[0].dim[0] = batch
    shapes = top_shapes(net)
    expected = {layer.name: [tuple(shapes[t]) for t in layer.top] for layer in net.layer
                if layer.type not in ("Dropout", "Input")}
    ours = ir_shapes(network)
    assert {name: ours[name] for name in expected} == expected


def test_googlenet_cli_writes_valid_ir(own_models, tmp_path):
    from ir import read_ir
    from tests.support import run_cli
    proto, weights = own_models["bvlc_googlenet"]
    code, out, err = run_cli("convert", "--input_model", weights, "--input_proto", proto, "-b", "1",
                             "--output_dir", str(tmp_path), "--model_name", "googlenet")
    assert code == 0, err
    assert "[ SUCCESS ]" in out
    net = read_ir(str(tmp_path / "googlenet.xml"), str(tmp_path / "googlenet.bin"))
    assert net.version == 2 and net.batch == 1
    conv = net.layer_by_name("conv1/7x7_s2")
    assert conv.type == "Convolution"
    assert conv.data["kernel-x"] == "7" and conv.data["stride"] == "1,1,2,2" and conv.data["output"] == "64"
    assert conv.blobs["weights"].size == 64 * 3 * 7 * 7 and conv.blobs["biases"].size == 64
    assert net.layer_by_name("prob").type == "SoftMax"
    assert net.layer_by_name("loss3/classifier").type == "FullyConnected"
