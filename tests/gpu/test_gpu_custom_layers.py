"""GPU custom layers (.xml + .cl in the Inference Engine GPU plugin's format) on
real OpenCL: the guide's example ReLU with its negative_slope define, a layer with
weight blobs, array defines and non-BFYX formats, FP32 and FP16 plans, against
numpy; build errors with the OpenCL build log; malformed files."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from tests.cpu.cpu_helpers import rel_err
from tests.gpu.gpu_helpers import chain_ir, rand

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
TOL = {"FP32": 1e-6, "FP16": 3e-3}


def custom(*names):
    from device_daemons.gpu.custom import CustomLayers
    return CustomLayers(*(os.path.join(DATA, n) for n in names))


def conv_then(layer, precision, tmp_path, shape=(2, 3, 7, 9)):
    rng = np.random.default_rng(0)
    conv = ("conv", "Convolution", {"kernel": "3,3", "strides": "1,1", "pads_begin": "1,1", "pads_end": "1,1",
                                    "output": 5, "group": 1},
            {"weights": rand(rng, 5, 3, 3, 3), "biases": rand(rng, 5)}, (shape[0], 5) + shape[2:])
    return chain_ir(tmp_path, shape, [conv, layer], precision), rand(rng, *shape)


@pytest.mark.parametrize("precision", ["FP32", "FP16"])
def test_the_guides_relu_example_overrides_the_builtin_relu(tmp_path, gpu_device, precision):
    from device_daemons.cpu import ExecutionPlan
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.custom import CustomKernel
    network, x = conv_then(("relu", "ReLU", {"negative_slope": 0.1}, None, (2, 5, 7, 9)), precision, tmp_path)
    plan = GpuPlan(network, gpu_device, custom_layers=custom("relu.xml"), extra_outputs=["conv"])
    step = plan.steps[1]
    assert isinstance(step.kernel, CustomKernel) and not step.fused and plan.steps[0].kernel.act[0] == 0
    ours = plan.infer({"data": x})
    conv = ExecutionPlan(network, extra_outputs=["conv"]).infer({"data": x})["conv"]
    expected = np.where(conv < 0, conv * np.float32(0.1), conv)
    assert rel_err(ours["conv"], conv) <= TOL[precision]
    assert rel_err(ours["relu"], expected) <= TOL[precision]
    assert (ours["relu"] < 0).any()


@pytest.mark.parametrize("precision", ["FP32", "FP16"])
def test_a_layer_with_weight_blobs_array_defines_and_formats(tmp_path, gpu_device, precision):
    from device_daemons.gpu import GpuPlan
    rng = np.random.default_rng(1)
    w, b = rand(rng, 5), rand(rng, 5)
    layer = ("affine", "ChannelAffine", {"offsets": "0.5,-1,2"}, {"weights": w, "biases": b}, (2, 5, 7, 9))
    network, x = conv_then(layer, precision, tmp_path)
    plan = GpuPlan(network, gpu_device, custom_layers=custom("channel_affine.xml"), extra_outputs=["conv"])
    ours = plan.infer({"data": x})
    offsets = np.array([0.5, -1, 2, 0.5, -1], np.float32) * 2   # SCALE's default is 2
    expected = ours["conv"] * w[None, :, None, None] + b[None, :, None, None] + offsets[None, :, None, None]
    assert rel_err(ours["affine"], expected) <= TOL[precision]
    plan.reshape({"data": (3, 3, 7, 9)})
    x3 = rand(rng, 3, 3, 7, 9)
    ours = plan.infer({"data": x3})
    assert ours["affine"].shape == (3, 5, 7, 9)
    expected = ours["conv"] * w[None, :, None, None] + b[None, :, None, None] + offsets[None, :, None, None]
    assert rel_err(ours["affine"], expected) <= TOL[precision]


def test_a_syntax_error_shows_the_build_log_and_the_files(tmp_path, gpu_device):
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.programs import BuildError
    network, _ = conv_then(("bad", "Broken", {}, None, (2, 5, 7, 9)), "FP32", tmp_path)
    with pytest.raises(BuildError) as info:
        GpuPlan(network, gpu_device, custom_layers=custom("broken.xml"))
    text = str(info.value)
    assert "broken.xml" in text and "broken_kernel.cl" in text and "'Broken'" in text
    assert "broken_kernel.cl:3" in text and "expected ';'" in text  # the compiler's log, the user's line numbers
    assert "\n" in text


def test_a_define_without_attribute_or_default_is_an_error(tmp_path, gpu_device):
    from device_daemons.cpu.kernels import KernelError
    from device_daemons.gpu import GpuPlan
    network, _ = conv_then(("affine", "ChannelAffine", {}, {"weights": np.ones(5), "biases": np.ones(5)},
                            (2, 5, 7, 9)), "FP32", tmp_path)
    with pytest.raises(KernelError, match="'offsets'.*no default"):
        GpuPlan(network, gpu_device, custom_layers=custom("channel_affine.xml"))


def test_a_missing_blob_is_an_error(tmp_path, gpu_device):
    from device_daemons.cpu.kernels import KernelError
    from device_daemons.gpu import GpuPlan
    network, _ = conv_then(("affine", "ChannelAffine", {"offsets": "1,2,3"}, {"weights": np.ones(5)},
                            (2, 5, 7, 9)), "FP32", tmp_path)
    with pytest.raises(KernelError, match="blob 'biases'"):
        GpuPlan(network, gpu_device, custom_layers=custom("channel_affine.xml"))


def test_the_entry_must_be_a_kernel_of_the_sources(tmp_path, gpu_device):
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.custom import CustomLayers
    from device_daemons.gpu.programs import BuildError
    shutil.copy(os.path.join(DATA, "relu_kernel.cl"), tmp_path)
    text = open(os.path.join(DATA, "relu.xml")).read().replace('entry="example_relu_kernel"', 'entry="relu_main"')
    (tmp_path / "r.xml").write_text(text)
    network, _ = conv_then(("relu", "ReLU", {}, None, (2, 5, 7, 9)), "FP32", tmp_path)
    with pytest.raises(BuildError, match="'relu_main' is not a kernel.*example_relu_kernel"):
        GpuPlan(network, gpu_device, custom_layers=CustomLayers(tmp_path / "r.xml"))


RELU = open(os.path.join(DATA, "relu.xml")).read()


@pytest.mark.parametrize("change,message", [
    (('type="SimpleGPU"', 'type="SimpleCPU"'), 'runs type="SimpleGPU" only'),
    (('entry="example_relu_kernel"', 'entry="1x"'), "must name the OpenCL kernel function"),
    (('filename="relu_kernel.cl"', 'filename="nowhere.cl"'), "cannot find the OpenCL source"),
    (('arg-index="1"', 'arg-index="2"'), "must be 0..1, each once"),
    (('format="BFYX"', 'format="NCHW"'), "format='NCHW'"),
    (('global="X,Y,B*F"', 'global="X**2"'), "may only use integers"),
    (('global="X,Y,B*F"', 'global="__import__(1)"'), "may only use integers"),
    (('global="X,Y,B*F"', 'global="X,Y,B,F"'), "1 to 3 entries"),
    (('type="float"', 'type="double"'), "use int, float"),
    (("</CustomLayer>", ""), "not well-formed XML"),
    (('<Tensor arg-index="1" type="output" port-index="0" format="BFYX"/>', ""), "binds no output"),
])
def test_malformed_files(tmp_path, change, message):
    from device_daemons.gpu.custom import CustomLayerError, CustomLayers
    shutil.copy(os.path.join(DATA, "relu_kernel.cl"), tmp_path)
    path = tmp_path / "layer.xml"
    path.write_text(RELU.replace(*change))
    with pytest.raises(CustomLayerError, match=message) as info:
        CustomLayers(path)
    assert str(path) in str(info.value)


def test_a_missing_file_and_an_entity_bomb(tmp_path):
    from device_daemons.gpu.custom import CustomLayerError, CustomLayers
    with pytest.raises(CustomLayerError, match="cannot find"):
        CustomLayers(tmp_path / "absent.xml")
    bomb = tmp_path / "bomb.xml"
    bomb.write_text('<!DOCTYPE x [<!ENTITY a "aaaa">]><CustomLayer name="&a;"/>')
    with pytest.raises(CustomLayerError):
        CustomLayers(bomb)


@pytest.mark.parametrize("text,dims,value", [("B*F*Y*X", (2, 3, 4, 5), 120), ("(X + 7) / 8 * 8", (1, 1, 1, 13), 16),
                                             ("-7 / 2", (1, 1, 1, 1), -3), ("-7 % 2", (1, 1, 1, 1), -1),
                                             ("F % 4 + Y", (1, 7, 2, 1), 5)])
def test_work_size_expressions_use_c_integer_arithmetic(text, dims, value):
    from device_daemons.gpu.custom import eval_size, parse_size
    env = dict(zip("BFYX", dims))
    assert eval_size(parse_size(text, "here"), env, text, "here") == value


def test_query_network_counts_custom_layers(tmp_path):
    from device_daemons.gpu.query import query_network
    network, _ = conv_then(("affine", "ChannelAffine", {"offsets": "1"}, {"weights": np.ones(5),
                                                                         "biases": np.ones(5)}, (2, 5, 7, 9)),
                           "FP32", tmp_path)
    assert query_network(network) == {"data": "GPU", "conv": "GPU"}
    assert query_network(network, custom("channel_affine.xml")) == {"data": "GPU", "conv": "GPU", "affine": "GPU"}


def test_a_plans_first_run_may_take_the_drivers_compile_time_later_ones_time_out(tmp_path, gpu_device, monkeypatch):
    """PoCL compiles each kernel for its work-group size at its first launch (63 s for GoogLeNet's
    simt kernels with an empty cache): a plan's first run gets request.FIRST_RUN_EXTRA_S on top of
    MO_CORE_GPU_TIMEOUT, later runs do not. Timed with the Spin kernel, (v - 100) million steps."""
    import time

    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.request import DeviceTimeout
    network = chain_ir(tmp_path, (1, 4), [("spin", "Spin", {}, None, (1, 4))])
    calibrate = GpuPlan(network, gpu_device, custom_layers=custom("spin.xml"))
    calibrate.infer({"data": np.zeros((1, 4), np.float32)})  # (compiled)
    start = time.monotonic()
    calibrate.infer({"data": np.full((1, 4), 120, np.float32)})
    per_million = (time.monotonic() - start) / 20
    steps = np.float32(100 + max(1, round(2.5 / max(per_million, 1e-4))))  # ~2.5 s of spinning
    monkeypatch.setenv("MO_CORE_GPU_TIMEOUT", "1")
    plan = GpuPlan(network, gpu_device, custom_layers=custom("spin.xml"))
    start = time.monotonic()
    out = plan.infer({"data": np.full((1, 4), steps, np.float32)})["spin"]
    assert time.monotonic() - start > 1.0 and np.all(out == steps * 2 + 1)  # past the timeout: the first run
    with pytest.raises(DeviceTimeout, match=r"within 1 s \(MO_CORE_GPU_TIMEOUT\); a kernel") as info:
        plan.infer({"data": np.full((1, 4), steps, np.float32)})
    assert "first run" not in str(info.value)
    time.sleep(2.0)  # (the spin the timeout left on the device ends)
