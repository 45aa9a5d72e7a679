"""Conv -> BatchNorm -> Scale -> ReLU becomes Conv -> ReLU with weights and
biases equal to the numpy computation (and the fused IR computes what pycaffe
computes); --disable_fusing keeps ScaleShift."""
import os

import numpy as np
import pytest

from tests.caffe_models import make_caffemodel
from tests.support import convert_api, import_caffe

NET = os.path.join(os.path.dirname(__file__), "nets", "conv_bn_scale.prototxt")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """(caffemodel, {layer: [blobs as float64]}), made without pycaffe."""
    weights = str(tmp_path_factory.mktemp("fuse") / "m.caffemodel")
    blobs = make_caffemodel(NET, weights, scale=0.3, positive=("conv1_bn", "conv1_scale", "fc_bn"))
    return weights, {name: [b.astype(np.float64) for b in arrays] for name, arrays in blobs.items()}


def test_fused_weights_equal_numpy(model):
    weights, params = model
    network = convert_api(input_model=weights, input_proto=NET)
    assert [layer.type for layer in network.layers] == ["Input", "Convolution", "ReLU", "FullyConnected"]
    w, b = (params["conv1"][i] for i in (0, 1))
    mean, var, factor = (params["conv1_bn"][i] for i in (0, 1, 2))
    mean, var = mean / factor[0], var / factor[0]
    gamma, beta = (params["conv1_scale"][i] for i in (0, 1))
    k = gamma / np.sqrt(var + 0.001)
    expected_w = w * k[:, None, None, None]
    expected_b = (b - mean) * k + beta
    conv = network.layer_by_name("conv1")
    np.testing.assert_allclose(conv.blobs["weights"], expected_w.ravel(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(conv.blobs["biases"], expected_b, rtol=1e-5, atol=1e-6)
    # BatchNorm after InnerProduct folds into the FullyConnected, which takes the name of the
    # network's output (fc_bn): users ask for the output by the name they know
    fw, fb = (params["fc"][i] for i in (0, 1))
    m2, v2, f2 = (params["fc_bn"][i] for i in (0, 1, 2))
    k2 = 1 / np.sqrt(v2 / f2[0] + 1e-5)
    fc = network.layer_by_name("fc_bn")
    assert fc.type == "FullyConnected" and "fc" not in [layer.name for layer in network.layers]
    np.testing.assert_allclose(fc.blobs["weights"], (fw * k2[:, None]).ravel(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fc.blobs["biases"], (fb - m2 / f2[0]) * k2, rtol=1e-5, atol=1e-6)


@pytest.mark.pycaffe
def test_fused_ir_computes_what_caffe_computes(model):
    """The fused Conv -> ReLU, computed with numpy from the IR's blobs, gives pycaffe's output."""
    weights, _ = model
    caffe = import_caffe()
    net = caffe.Net(NET, weights, caffe.TEST)
    network = convert_api(input_model=weights, input_proto=NET)
    x = np.random.default_rng(3).normal(size=(1, 3, 10, 10)).astype(np.float32)
    net.blobs["data"].data[...] = x
    ref = net.forward()["fc_bn"].copy()
    conv, fc = network.layer_by_name("conv1"), network.layer_by_name("fc_bn")
    w = conv.blobs["weights"].reshape(6, 3, 3, 3)
    padded = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))  # C,H,W,3,3
    y = np.einsum("chwij,ocij->ohw", windows, w) + conv.blobs["biases"][:, None, None]
    y = np.maximum(y, 0)
    out = fc.blobs["weights"].reshape(5, -1) @ y.ravel() + fc.blobs["biases"]
    np.testing.assert_allclose(out, ref[0], rtol=1e-4, atol=1e-5)


def test_disable_fusing_keeps_scale_shift(model):
    weights, params = model
    network = convert_api(input_model=weights, input_proto=NET, disable_fusing=True)
    types = [layer.type for layer in network.layers]
    assert types == ["Input", "Convolution", "ScaleShift", "ScaleShift", "ReLU", "FullyConnected", "ScaleShift"]
    bn = network.layer_by_name("conv1_bn")
    mean, var, factor = (params["conv1_bn"][i] for i in (0, 1, 2))
    k = 1 / np.sqrt(var / factor[0] + 0.001)
    np.testing.assert_allclose(bn.blobs["weights"], k, rtol=1e-5)
    np.testing.assert_allclose(bn.blobs["biases"], -mean / factor[0] * k, rtol=1e-5, atol=1e-7)
    scale = network.layer_by_name("conv1_scale")
    np.testing.assert_allclose(scale.blobs["weights"], params["conv1_scale"][0])
    np.testing.assert_allclose(network.layer_by_name("conv1").blobs["weights"], params["conv1"][0].ravel())
