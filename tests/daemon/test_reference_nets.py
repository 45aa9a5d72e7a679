"""The converter issue's nets run on the CPU daemon (through ZeroMQ, IECore) and
equal pycaffe's forward: the sdist's AlexNet, GoogLeNet and CaffeNet, the
SSD-style net and the Conv-BatchNorm-Scale net, with fusing on and off (1e-4
relative, max over outputs), and FP16 IRs within 1e-2."""
import numpy as np
import pytest

from tests.daemon.conftest import F32
from tests.support import BVLC, caffe_outputs, compare_with_caffe, convert_api


@pytest.fixture(scope="module")
def ie():
    from device_daemons.client import IECore
    core = IECore(policy="auto")
    core.set_config(F32, "CPU")  # compared with pycaffe to 1e-4
    return core


def run_on_daemon(ie, proto, weights, tmp_path, **options):
    from ir import write_ir
    network = convert_api(input_model=weights, input_proto=proto, **options)
    xml = str(tmp_path / "model.xml")
    write_ir(network, xml, precision=options.get("data_type", "FP32"))
    net = ie.read_network(model=xml)
    exec_net = ie.load_network(net, "CPU")
    rng = np.random.default_rng(11)
    inputs = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in net.inputs.items()}
    out = exec_net.infer(inputs)
    exec_net.close()
    return inputs, out


@pytest.mark.parametrize("fusing", [True, False], ids=["fusing", "no_fusing"])
@pytest.mark.parametrize("model", BVLC + ("ssd_small", "conv_bn_scale"))
def test_daemon_equals_pycaffe(ie, bvlc_models, small_nets, tmp_path, model, fusing):
    proto, weights = (bvlc_models if model in BVLC else small_nets)[model]
    inputs, ours = run_on_daemon(ie, proto, weights, tmp_path, disable_fusing=not fusing)
    compare_with_caffe(ours, caffe_outputs(proto, weights, inputs), 1e-4)


@pytest.mark.parametrize("model", BVLC)
def test_fp16_ir_on_the_daemon(ie, bvlc_models, tmp_path, model):
    proto, weights = bvlc_models[model]
    inputs, ours = run_on_daemon(ie, proto, weights, tmp_path, data_type="FP16")
    compare_with_caffe(ours, caffe_outputs(proto, weights, inputs), 1e-2)
