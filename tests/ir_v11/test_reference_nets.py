"""The issue's nets as IR v11 on the real OpenVINO runtime (f32 inference precision):
the sdist's AlexNet, GoogLeNet and CaffeNet, the SSD-style net, the
Conv-BatchNorm-Scale net and an FCN-style Deconvolution/Crop segmentation net
equal pycaffe within 1e-4 (max |diff| / max |reference|), with fusing on and off;
FP16 IRs within 1e-2. The segmentation net with a DeepLab Interp head (pycaffe has
no Interp) equals OpenCV DNN's Caffe importer on the same weights."""
from __future__ import annotations

import os

import numpy as np
import pytest

from ir.v11 import write_ir_v11
from tests.ir_v11.v11_helpers import F32, assert_outputs_close, caffe_forward, compile_v11
from tests.support import BVLC, convert_api, import_caffe, make_caffemodel, write_text

NETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nets")
MODELS = BVLC + ("ssd_small", "conv_bn_scale", "fcn_deconv", "seg_interp")


@pytest.fixture(scope="session")
def segmentation_nets(tmp_path_factory):
    """{name: (prototxt, caffemodel)}: the FCN-style net, and the same net with the
    Interp head (its layers have no weights: the same caffemodel)."""
    d = tmp_path_factory.mktemp("segmentation")
    fcn = os.path.join(NETS, "fcn_deconv.prototxt")
    weights = str(d / "fcn.caffemodel")
    make_caffemodel(fcn, weights, scale=0.3, positive=("conv1_bn", "conv1_scale"))
    with open(fcn) as a, open(os.path.join(NETS, "interp_head.prototxt")) as b:
        seg = write_text(str(d / "seg_interp.prototxt"), a.read() + b.read())
    return {"fcn_deconv": (fcn, weights), "seg_interp": (seg, weights)}


@pytest.fixture(scope="session")
def references(bvlc_models, small_nets, segmentation_nets):
    """model -> (prototxt, caffemodel, inputs, {output layer name: reference}), each
    computed once per session."""
    models = {**bvlc_models, **small_nets, **segmentation_nets}
    cache = {}

    def get(model):
        if model not in cache:
            proto, weights = models[model]
            rng = np.random.default_rng(11)
            if model == "seg_interp":
                import cv2
                net = cv2.dnn.readNetFromCaffe(proto, weights)
                inputs = {"data": rng.standard_normal((1, 3, 33, 33)).astype(np.float32)}
                net.setInput(inputs["data"])
                names = ["prob", "seg_prob"]
                ref = dict(zip(names, net.forward(names)))
            else:
                caffe = import_caffe()
                net = caffe.Net(proto, weights, caffe.TEST)
                inputs = {name: rng.standard_normal(net.blobs[name].data.shape).astype(np.float32)
                          for name in net.inputs}
                blobs = caffe_forward(net, inputs)
                consumed = {b for layer in net._layer_names for b in net.bottom_names[layer]}
                ref = {layer: blobs[net.top_names[layer][0]] for layer in net._layer_names
                       if net.top_names[layer] and net.top_names[layer][0] not in consumed
                       and net.layers[list(net._layer_names).index(layer)].type != "Input"}
            cache[model] = (proto, weights, inputs, ref)
        return cache[model]
    return get


VARIANTS = ([(m, True, "FP32") for m in MODELS] + [(m, False, "FP32") for m in MODELS]
            + [(m, True, "FP16") for m in MODELS] + [("conv_bn_scale", False, "FP16"), ("fcn_deconv", False, "FP16")])


@pytest.mark.parametrize("model,fusing,data_type", VARIANTS,
                         ids=[f"{m}-{'fused' if f else 'unfused'}-{t}" for m, f, t in VARIANTS])
def test_v11_on_openvino_equals_reference(ov_core, references, tmp_path, model, fusing, data_type):
    proto, weights, inputs, ref = references(model)
    network = convert_api(input_model=weights, input_proto=proto, disable_fusing=not fusing, data_type=data_type)
    run = compile_v11(ov_core, network, tmp_path, data_type=data_type)
    assert sorted(ref) == sorted(o.get_any_name() for o in run.compiled.outputs)
    ours = run.infer(inputs)
    assert_outputs_close(ours, ref, 1e-4 if data_type == "FP32" else 1e-2)


@pytest.mark.parametrize("model", ["bvlc_alexnet", "ssd_small", "fcn_deconv"])
def test_v11_reshaped_to_another_batch(ov_core, references, tmp_path, model):
    """An IR made for batch 1, reshaped by OpenVINO to batch 3 (Reshape targets copy
    the batch, the priors do not depend on it), equals pycaffe at batch 3."""
    proto, weights, _, _ = references(model)
    xml = str(tmp_path / "model.xml")
    write_ir_v11(convert_api(input_model=weights, input_proto=proto), xml)
    ov_model = ov_core.read_model(xml)
    name = ov_model.inputs[0].get_any_name()
    shape = [3] + list(ov_model.inputs[0].get_shape())[1:]
    ov_model.reshape({name: shape})
    compiled = ov_core.compile_model(ov_model, "CPU", F32)
    x = {name: np.random.default_rng(12).standard_normal(shape).astype(np.float32)}
    caffe = import_caffe()
    net = caffe.Net(proto, weights, caffe.TEST)
    ref = caffe_forward(net, x)
    ours = {n: np.array(v) for port, v in compiled(x).items() for n in port.get_names()}
    layers = [o.get_any_name() for o in compiled.outputs]
    assert_outputs_close(ours, {layer: ref[net.top_names[layer][0]] for layer in layers}, 1e-4)


def test_rfcn_head_with_roi_priors(ov_core, tmp_path):
    """The R-FCN-like head of tests/cpu/test_cpu_rfcn.py (Proposal -> PSROIPooling ->
    DetectionOutput with normalized: false ROI priors) as IR v11 on OpenVINO equals
    the CPU daemon's plan on the same converted network (pycaffe cannot run
    PSROIPooling on the CPU; the plan's DetectionOutput is checked against
    OpenVINO's, its Proposal and PSROIPooling against pycaffe and a reference)."""
    from tests.cpu.cpu_helpers import convert_to_plan
    from tests.cpu.test_cpu_rfcn import assert_same_head_detections, head
    proto, weights = head(tmp_path)
    plan, network = convert_to_plan(proto, weights, tmp_path)
    run = compile_v11(ov_core, network, tmp_path, name="rfcn")
    assert_same_head_detections(run.infer, plan.infer, 3, 10)
