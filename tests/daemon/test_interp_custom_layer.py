"""Interp (the PSPNet/DeepLab Caffe layer) end to end on the CPU daemon.

The CPU plugin has a built-in Interp kernel; the reference guide's custom-layer
example (an OpenCV-style Python kernel, tests/daemon/data/interp_kernel.py) still
works and replaces it when registered (-l / add_extension). Both equal OpenCV DNN.
Encoder-decoder nets with an Interp zoom and a skip Eltwise convert with either
zoom rule (the reference's in * zoom by default, DeepLab's on request) and run on
the daemon, equal to an independent numpy reference."""
import os

import numpy as np
import pytest

from tests.caffe_models import make_caffemodel as make_own_caffemodel
from tests.daemon.conftest import F32, run_mo
from tests.numpy_reference import caffe_interp, conv2d, relu
from tests.support import make_caffemodel, write_text

KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "interp_kernel.py")
LAYERS = """name: "interp_net"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 5 dim: 7 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 4 kernel_size: 1 } }
"""
INTERP = 'layer { name: "interp" type: "Interp" bottom: "conv" top: "interp" interp_param { height: 9 width: 8 } }\n'


@pytest.fixture
def interp_model(tmp_path):
    base = write_text(str(tmp_path / "base.prototxt"), LAYERS)  # pycaffe has no Interp: weights from the rest
    full = write_text(str(tmp_path / "full.prototxt"), LAYERS + INTERP)
    weights = str(tmp_path / "m.caffemodel")
    make_caffemodel(base, weights, scale=0.5)
    res = run_mo("convert", "--input_model", weights, "--input_proto", full, "--output_dir", str(tmp_path / "ir"),
                 "--model_name", "interp", "--silent")
    assert res.returncode == 0, res.stderr
    return full, weights, str(tmp_path / "ir" / "interp.xml")


def opencv_reference(proto, weights, x):
    import cv2
    net = cv2.dnn.readNetFromCaffe(proto, weights)
    net.setInput(x)
    return net.forward()


def test_builtin_interp_and_the_example_kernel_match_opencv(interp_model):
    from device_daemons.client import IECore
    proto, weights, xml = interp_model
    x = np.random.default_rng(4).standard_normal((2, 3, 5, 7)).astype(np.float32)
    ref = opencv_reference(proto, weights, x)
    ie = IECore(policy="auto")
    ie.set_config(F32, "CPU")  # compared with OpenCV to 1e-4
    exec_net = ie.load_network(ie.read_network(model=xml), "CPU")  # the built-in kernel
    out = exec_net.infer({"data": x})["interp"]
    assert out.shape == ref.shape == (2, 4, 9, 8)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    exec_net.close()
    ie.add_extension(KERNEL, "CPU")  # the reference guide's example replaces it
    exec_net = ie.load_network(ie.read_network(model=xml), "CPU")
    np.testing.assert_allclose(exec_net.infer({"data": x})["interp"], ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    exec_net.close()


def test_interp_through_the_cli(interp_model, tmp_path):
    proto, weights, xml = interp_model
    x = np.random.default_rng(5).standard_normal((2, 3, 5, 7)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    ref = opencv_reference(proto, weights, x)
    for extra in ((), ("-l", KERNEL)):
        res = run_mo("infer", "-m", xml, "-i", str(tmp_path / "x.npy"), *extra, "-o", str(tmp_path / "out.npz"),
                     "-infer_precision", "f32")
        assert res.returncode == 0, res.stderr
        np.testing.assert_allclose(np.load(tmp_path / "out.npz")["interp"], ref, rtol=1e-4, atol=1e-5)


# --- encoder-decoder: Interp zoom + skip Eltwise ---------------------------------------------
ENC_DEC = """name: "encdec"
layer {{ name: "data" type: "Input" top: "data" input_param {{ shape {{ dim: 1 dim: 3 dim: {h} dim: {w} }} }} }}
layer {{ name: "enc" type: "Convolution" bottom: "data" top: "enc"
  convolution_param {{ num_output: 6 kernel_size: 3 pad: 1 }} }}
layer {{ name: "enc_relu" type: "ReLU" bottom: "enc" top: "enc" }}
layer {{ name: "down" type: "Convolution" bottom: "enc" top: "down"
  convolution_param {{ num_output: 6 kernel_size: 3 stride: 2 pad: 1 }} }}
layer {{ name: "down_relu" type: "ReLU" bottom: "down" top: "down" }}
layer {{ name: "up" type: "Interp" bottom: "down" top: "up" interp_param {{ zoom_factor: 2 }} }}
layer {{ name: "skip" type: "Eltwise" bottom: "up" bottom: "enc" top: "skip" }}
layer {{ name: "score" type: "Convolution" bottom: "skip" top: "score"
  convolution_param {{ num_output: 2 kernel_size: 1 }} }}
"""


def encoder_decoder(tmp_path, h, w):
    proto = write_text(str(tmp_path / "encdec.prototxt"), ENC_DEC.format(h=h, w=w))
    weights = str(tmp_path / "encdec.caffemodel")
    blobs = make_own_caffemodel(proto, weights, scale=None)
    return proto, weights, blobs


def numpy_encoder_decoder(x, blobs):
    enc = relu(conv2d(x, *blobs["enc"], pad=1))
    down = relu(conv2d(enc, *blobs["down"], stride=2, pad=1))
    up = caffe_interp(down, enc.shape[2], enc.shape[3])
    return conv2d(up + enc, *blobs["score"])


def assert_daemon_equals_numpy(xml, blobs, h, w, seed):
    """Runs the IR on the CPU daemon; its output equals the numpy reference. Returns (x, output)."""
    from device_daemons.client import IECore
    x = np.random.default_rng(seed).standard_normal((1, 3, h, w)).astype(np.float32)
    ie = IECore(policy="auto")
    exec_net = ie.load_network(ie.read_network(model=xml), "CPU", config=F32)
    try:
        out = exec_net.infer({"data": x})["score"]
    finally:
        exec_net.close()
    ref = numpy_encoder_decoder(x, blobs)
    assert out.shape == ref.shape == (1, 2, h, w)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    return x, out


def convert_encoder_decoder(tmp_path, proto, weights, *extra):
    return run_mo("convert", "--input_model", weights, "--input_proto", proto, "--output_dir", str(tmp_path / "ir"),
                  *extra)


def test_encoder_decoder_with_the_reference_zoom_rule(tmp_path):
    """16x24 -> 8x12 -> zoom 2 -> 16x24: in * zoom, the reference's default."""
    proto, weights, blobs = encoder_decoder(tmp_path, 16, 24)
    res = convert_encoder_decoder(tmp_path, proto, weights)
    assert res.returncode == 0, res.stderr
    assert_daemon_equals_numpy(str(tmp_path / "ir" / "encdec.xml"), blobs, 16, 24, seed=6)


def test_encoder_decoder_made_for_deeplab(tmp_path):
    """15x23 -> 8x12 -> zoom 2 -> 15x23 only with DeepLab's (in - 1) * zoom + 1."""
    proto, weights, blobs = encoder_decoder(tmp_path, 15, 23)
    res = convert_encoder_decoder(tmp_path, proto, weights)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "Eltwise 'skip' inputs have different shapes: [1, 6, 16, 24], [1, 6, 15, 23]" in res.stderr
    assert "--interp_zoom_rule deeplab (FAQ #96)" in res.stderr
    res = convert_encoder_decoder(tmp_path, proto, weights, "--interp_zoom_rule", "deeplab")
    assert res.returncode == 0, res.stderr
    x, out = assert_daemon_equals_numpy(str(tmp_path / "ir" / "encdec.xml"), blobs, 15, 23, seed=7)
    # OpenCV DNN sizes Interp zooms the DeepLab way too
    ref = opencv_reference(proto, weights, x)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
