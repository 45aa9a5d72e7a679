"""The reference guide's custom layer example end to end: a Caffe net with a DeepLab
`Interp` layer converts to an IR whose Interp layer has no built-in kernel; on the
CPU daemon it fails clearly until an OpenCV-style Python kernel is registered
(-l / add_extension), then it equals OpenCV DNN's own Interp on the same model."""
import os

import numpy as np
import pytest

from tests.daemon.conftest import run_mo
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


def test_interp_needs_a_kernel_then_matches_opencv(interp_model):
    from core.errors import Error
    from device_daemons.client import IECore
    proto, weights, xml = interp_model
    ie = IECore(policy="auto")
    with pytest.raises(Error) as err:
        ie.load_network(ie.read_network(model=xml), "CPU")
    assert "Interp" in str(err.value) and "-l" in str(err.value)
    ie.add_extension(KERNEL, "CPU")
    exec_net = ie.load_network(ie.read_network(model=xml), "CPU")
    x = np.random.default_rng(4).standard_normal((2, 3, 5, 7)).astype(np.float32)
    out = exec_net.infer({"data": x})["interp"]
    ref = opencv_reference(proto, weights, x)
    assert out.shape == ref.shape == (2, 4, 9, 8)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    exec_net.close()


def test_interp_through_the_cli(interp_model, tmp_path):
    proto, weights, xml = interp_model
    x = np.random.default_rng(5).standard_normal((2, 3, 5, 7)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    res = run_mo("infer", "-m", xml, "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "out.npz"))
    assert res.returncode == 1 and "Interp" in res.stderr and "Traceback" not in res.stderr
    res = run_mo("infer", "-m", xml, "-i", str(tmp_path / "x.npy"), "-l", KERNEL, "-o", str(tmp_path / "out.npz"))
    assert res.returncode == 0, res.stderr
    out = np.load(tmp_path / "out.npz")["interp"]
    np.testing.assert_allclose(out, opencv_reference(proto, weights, x), rtol=1e-4, atol=1e-5)
