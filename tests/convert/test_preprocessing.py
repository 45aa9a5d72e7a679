"""--mean_values / --scale_values / --scale / --reverse_input_channels: folded into
the first convolution where that is exact, else a ScaleShift; checked by running
the net with the IR's weights on raw input against the original net on
preprocessed input, in numpy and in pycaffe."""
import numpy as np
import pytest

from tests.caffe_models import make_caffemodel
from tests.numpy_reference import conv2d, relu
from tests.support import convert_api, import_caffe, write_text

NET = """
name: "pre"
layer {{ name: "data" type: "Input" top: "data" input_param {{ shape {{ dim: 1 dim: 3 dim: 9 dim: 9 }} }} }}
layer {{ name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param {{ num_output: 4 kernel_size: 3 pad: {pad} }} }}
layer {{ name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }}
"""


@pytest.fixture(scope="module", params=[0, 1], ids=["pad0", "pad1"])
def model(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("pre")
    proto = write_text(str(d / "pre.prototxt"), NET.format(pad=request.param))
    weights = str(d / "pre.caffemodel")
    blobs = make_caffemodel(proto, weights, scale=0.5)
    return proto, weights, request.param, blobs


def run_numpy(model, x, conv_weights=None, conv_bias=None):
    _, _, pad, blobs = model
    w, b = blobs["conv1"]
    if conv_weights is not None:
        w, b = conv_weights.reshape(w.shape), conv_bias
    return relu(conv2d(x, w, b, pad=pad))


def run_caffe(model, x, conv_weights=None, conv_bias=None):
    proto, weights = model[:2]
    caffe = import_caffe()
    net = caffe.Net(proto, weights, caffe.TEST)
    if conv_weights is not None:
        net.params["conv1"][0].data[...] = conv_weights.reshape(net.params["conv1"][0].data.shape)
        net.params["conv1"][1].data[...] = conv_bias
    net.blobs["data"].data[...] = x
    return net.forward()["conv1"].copy()


@pytest.mark.parametrize("engine", [run_numpy, pytest.param(run_caffe, marks=pytest.mark.pycaffe)],
                         ids=["numpy", "pycaffe"])
@pytest.mark.parametrize("reverse", [False, True])
def test_mean_scale_reverse(model, reverse, engine):
    proto, weights, pad, _ = model
    mean, scale = np.array([10.0, 20.0, 30.0]), np.array([2.0, 4.0, 8.0])
    network = convert_api(input_model=weights, input_proto=proto, mean_values="(10,20,30)",
                          scale_values="[2,4,8]", reverse_input_channels=reverse)
    types = [layer.type for layer in network.layers]
    x = np.random.default_rng(1).uniform(0, 255, (1, 3, 9, 9)).astype(np.float32)
    model_input = x[:, ::-1] if reverse else x
    ref = engine(model, (model_input - mean[None, :, None, None]) / scale[None, :, None, None])
    conv = network.layer_by_name("conv1")
    if pad == 0:  # everything folds into the convolution
        assert types == ["Input", "Convolution", "ReLU"]
        ours = engine(model, x, conv.blobs["weights"], conv.blobs["biases"])
    else:  # the shift cannot go into a padded convolution: a ScaleShift stays
        assert types == ["Input", "ScaleShift", "Convolution", "ReLU"]
        ss = network.layers[1]
        y = x * ss.blobs["weights"][None, :, None, None] + ss.blobs["biases"][None, :, None, None]
        ours = engine(model, y, conv.blobs["weights"], conv.blobs["biases"])
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_named_values_and_scale(model):
    proto, weights = model[:2]
    a = convert_api(input_model=weights, input_proto=proto, mean_values="data[1,2,3]", scale=4.0,
                    disable_fusing=True)
    assert [layer.type for layer in a.layers] == ["Input", "ScaleShift", "Convolution", "ReLU"]
    ss = a.layers[1]
    np.testing.assert_allclose(ss.blobs["weights"], [0.25] * 3)
    np.testing.assert_allclose(ss.blobs["biases"], [-0.25, -0.5, -0.75])
