"""Whole networks: the Caffe sdist's bvlc_alexnet, bvlc_googlenet and
bvlc_reference_caffenet converted with fusing on and off, -b 1 and 2, FP32 and
FP16, run by the ExecutionPlan and compared with pycaffe's forward: the final
prob, the classifier's logits and a mid-level blob (a blob no in-place layer
overwrites in Caffe), as max |diff| / max |reference|."""
from __future__ import annotations

import numpy as np
import pytest

from tests.cpu.cpu_helpers import BVLC, assert_backend, assert_close, convert_to_plan

# the parity tests run on both CPU backends (tests/cpu/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_backend")

# plan output key (producing layer) -> caffe blob
CHECKS = {
    "bvlc_googlenet": {"prob": "prob", "loss3/classifier": "loss3/classifier",
                       "inception_4e/output": "inception_4e/output", "conv2/norm2": "conv2/norm2"},
    "bvlc_alexnet": {"prob": "prob", "fc8": "fc8", "pool5": "pool5", "norm1": "norm1"},
    "bvlc_reference_caffenet": {"prob": "prob", "fc8": "fc8", "pool5": "pool5", "norm2": "norm2"},
}


# every layer type of these nets has a oneDNN primitive
NATIVE_TYPES = ("Convolution", "ReLU", "Pooling", "Norm", "Concat", "FullyConnected", "SoftMax")


def caffe_forward(net, x):
    net.blobs["data"].reshape(*x.shape)
    net.reshape()
    net.blobs["data"].data[...] = x
    net.forward()
    return {k: v.data.copy() for k, v in net.blobs.items()}


def check(ours, ref, model, rtol):
    for key, blob in CHECKS[model].items():
        assert_close(ours[key], ref[blob], rtol, f"{model} {key}")


@pytest.mark.parametrize("batch", [1, 2], ids=["b1", "b2"])
@pytest.mark.parametrize("fusing", [True, False], ids=["fusing", "no_fusing"])
@pytest.mark.parametrize("model", BVLC)
def test_network_matches_pycaffe(cpu_bvlc, tmp_path, model, fusing, batch, cpu_backend):
    proto, weights, net = cpu_bvlc(model)
    plan, network = convert_to_plan(proto, weights, tmp_path, disable_fusing=not fusing, batch=batch,
                                    extra_outputs=[k for k in CHECKS[model] if k != "prob"])
    assert plan.warnings == []
    assert_backend(plan, cpu_backend, NATIVE_TYPES)
    shape = plan.input_shapes()["data"]
    assert shape[0] == batch
    x = np.random.default_rng(batch).standard_normal(shape).astype(np.float32)
    ours = plan.infer({"data": x})
    check(ours, caffe_forward(net, x), model, 1e-4)


@pytest.mark.parametrize("model", BVLC)
def test_fp16_network_matches_pycaffe(cpu_bvlc, tmp_path, model):
    proto, weights, net = cpu_bvlc(model)
    plan, network = convert_to_plan(proto, weights, tmp_path, batch=1, data_type="FP16",
                                    extra_outputs=[k for k in CHECKS[model] if k != "prob"])
    assert {layer.precision for layer in network.layers} == {"FP16"}
    x = np.random.default_rng(5).standard_normal(plan.input_shapes()["data"]).astype(np.float32)
    check(plan.infer({"data": x}), caffe_forward(net, x), model, 1e-2)


def test_plan_reshape_to_another_batch(cpu_bvlc, tmp_path, cpu_backend):
    """An IR made for batch 1 re-shaped by the plan to batch 3 (getMemoryShapes of
    every layer), against pycaffe at batch 3; then back to 1."""
    proto, weights, net = cpu_bvlc("bvlc_googlenet")
    plan, _ = convert_to_plan(proto, weights, tmp_path, batch=1, extra_outputs=["loss3/classifier"])
    plan.reshape({"data": (3, 3, 224, 224)})  # the oneDNN primitives are made again for batch 3
    assert_backend(plan, cpu_backend, NATIVE_TYPES)
    assert plan.output_shapes() == {"prob": (3, 1000), "loss3/classifier": (3, 1000)}
    x = np.random.default_rng(9).standard_normal((3, 3, 224, 224)).astype(np.float32)
    ref = caffe_forward(net, x)
    ours = plan.infer({"data": x})
    assert_close(ours["loss3/classifier"], ref["loss3/classifier"], 1e-4, "batch 3 logits")
    assert_close(ours["prob"], ref["prob"], 1e-4, "batch 3 prob")
    plan.reshape({"data": (1, 3, 224, 224)})
    ours = plan.infer({"data": x[1:2]})
    assert_close(ours["loss3/classifier"], ref["loss3/classifier"][1:2], 1e-4, "batch 1 again")
