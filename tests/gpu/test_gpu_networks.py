"""Whole networks on the GPU plan (real OpenCL: PoCL here) against pycaffe's
forward: the Caffe sdist's AlexNet, GoogLeNet and CaffeNet, the SSD-style net and
the Conv-BatchNorm-Scale net, FP32 within 1e-4 (fusing on and off) and FP16 IRs
(half storage on the device) within 1e-2, as max |diff| / max |reference|."""
from __future__ import annotations

import numpy as np
import pytest

from tests.support import BVLC, caffe_outputs, compare_with_caffe, convert_api

MODELS = BVLC + ("ssd_small", "conv_bn_scale")
# a mid-level blob no in-place Caffe layer overwrites, returned as an extra output
MIDDLE = {"bvlc_googlenet": "inception_4e/output", "bvlc_alexnet": "pool5", "bvlc_reference_caffenet": "norm2"}


def gpu_plan(proto, weights, tmp_path, gpu_device, model, **options):
    from device_daemons.gpu import GpuPlan
    from ir import read_ir, write_ir
    options.setdefault("batch", 1)  # the sdist's AlexNet/CaffeNet deploy nets say 10: 1 keeps the suite fast
    network = convert_api(input_model=weights, input_proto=proto, **options)
    xml = str(tmp_path / "model.xml")
    write_ir(network, xml, precision=options.get("data_type", "FP32"))
    extra = [MIDDLE[model]] if model in MIDDLE else None
    return GpuPlan(read_ir(xml), gpu_device, extra_outputs=extra)


def run(plan, seed=11):
    rng = np.random.default_rng(seed)
    inputs = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in plan.input_shapes().items()}
    return inputs, plan.infer(inputs)


def model_files(model, bvlc_models, small_nets):
    return (bvlc_models if model in BVLC else small_nets)[model]


@pytest.mark.parametrize("fusing", [True, False], ids=["fusing", "no_fusing"])
@pytest.mark.parametrize("model", MODELS)
def test_network_equals_pycaffe(bvlc_models, small_nets, gpu_device, tmp_path, model, fusing):
    proto, weights = model_files(model, bvlc_models, small_nets)
    plan = gpu_plan(proto, weights, tmp_path, gpu_device, model, disable_fusing=not fusing)
    assert plan.warnings == [] and plan.precision == "FP32"
    inputs, ours = run(plan)
    compare_with_caffe(ours, caffe_outputs(proto, weights, inputs), 1e-4)


def test_googlenet_in_the_gpu_style_equals_pycaffe(bvlc_models, gpu_device, tmp_path):
    """The GPU-style kernels on the whole of GoogLeNet (as on a GPU): tiled GEMMs,
    each inception block's 1x1, 3x3_reduce and 5x5_reduce as one GEMM (9 launches
    instead of 27), the pooling before each pool_proj read through by it,
    element-wise kernels with explicit work groups, the launches enqueued by the
    C loop."""
    from device_daemons.gpu import GpuPlan
    from ir import read_ir, write_ir
    proto, weights = bvlc_models["bvlc_googlenet"]
    xml = str(tmp_path / "model.xml")
    write_ir(convert_api(input_model=weights, input_proto=proto, batch=1), xml)
    plan = GpuPlan(read_ir(xml), gpu_device, style="simt")
    merged = [st for st in plan.steps if st.merged_into]
    assert len(merged) == 27 and {st.layer.name.split("/")[1] for st in merged} == {"3x3_reduce", "5x5_reduce", "pool"}
    assert {st.merged_into.split("/")[1] for st in merged} == {"1x1", "pool_proj"}
    assert plan.create_request().segments is not None
    inputs, ours = run(plan)
    compare_with_caffe(ours, caffe_outputs(proto, weights, inputs), 1e-4)


@pytest.mark.parametrize("model", MODELS)
def test_fp16_network_equals_pycaffe(bvlc_models, small_nets, gpu_device, tmp_path, model):
    proto, weights = model_files(model, bvlc_models, small_nets)
    plan = gpu_plan(proto, weights, tmp_path, gpu_device, model, data_type="FP16")
    assert plan.precision == "FP16" and plan.ctx.dtype == np.float16
    inputs, ours = run(plan)
    compare_with_caffe(ours, caffe_outputs(proto, weights, inputs), 1e-2)


def test_batch_reshape_and_concurrent_requests(bvlc_models, gpu_device, tmp_path):
    """GoogLeNet made for batch 1, reshaped to 3 (every shape and the memory plan
    re-done), run from two threads at once (one queue and arena per request)."""
    from tests.support import run_in_threads
    proto, weights = bvlc_models["bvlc_googlenet"]
    plan = gpu_plan(proto, weights, tmp_path, gpu_device, "bvlc_googlenet")
    plan.reshape({"data": (3, 3, 224, 224)})
    assert plan.output_shapes()["prob"] == (3, 1000)
    x = np.random.default_rng(4).standard_normal((3, 3, 224, 224)).astype(np.float32)
    net = caffe_outputs(proto, weights, {"data": x})
    results = {}
    run_in_threads(lambda t: results.__setitem__(t, plan.infer({"data": x})), 2)
    for ours in results.values():
        compare_with_caffe(ours, net, 1e-4)
    assert len(plan._idle) == 2


def test_rfcn_head_runs_whole_on_the_gpu_plan(tmp_path, gpu_device):
    """The R-FCN-like head of tests/cpu/test_cpu_rfcn.py (RPN -> Proposal -> PSROIPooling -> DetectionOutput with
    ROI priors, held against OpenVINO there): every layer in the GPU plan - the proposals and the position-sensitive
    pooling on the host between the device layers, no HETERO split - and its detections the CPU plan's."""
    from device_daemons.cpu import ExecutionPlan
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.query import query_network
    from ir import read_ir, write_ir
    from tests.cpu.test_cpu_rfcn import assert_same_head_detections, head
    proto, weights = head(tmp_path)
    xml = str(tmp_path / "rfcn.xml")
    write_ir(convert_api(input_model=weights, input_proto=proto), xml)
    network = read_ir(xml)
    assert set(query_network(network)) == {layer.name for layer in network.layers}
    gpu, cpu = GpuPlan(network, gpu_device), ExecutionPlan(read_ir(xml), precision="f32")
    assert_same_head_detections(gpu.infer, cpu.infer, 2, 5)
