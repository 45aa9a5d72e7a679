"""--data_type FP16 for IR v11 as OpenVINO's own converters store it: every float
constant f16, followed by a Convert to f32 marked `decompression`; inputs, outputs
and the computation stay f32. Compression rounds the weights and nothing else."""
from __future__ import annotations

import os

import numpy as np

from ir import Edge, Layer, Network, Port
from ir.v11 import build_model
from tests.ir_v11.v11_helpers import assert_close, compile_v11
from tests.support import convert_api


def test_fp16_constants_are_f16_with_a_decompression_convert(ov_core, small_nets, tmp_path):
    proto, weights = small_nets["conv_bn_scale"]
    network = convert_api(input_model=weights, input_proto=proto)
    fp32 = compile_v11(ov_core, network, tmp_path, name="fp32")
    fp16 = compile_v11(ov_core, network, tmp_path, data_type="FP16", name="fp16")
    consts = [op for op in fp16.model.ops if op.type == "Const" and op.out.element_type in ("f16", "f32")]
    assert consts and all(op.out.element_type == "f16" for op in consts)
    for const in consts:
        users = [op for op in fp16.model.ops if any(t is const.out for t in op.inputs)]
        assert [(u.type, u.attrs, u.rt_info) for u in users] == [("Convert", {"destination_type": "f32"},
                                                                  ["decompression"])]
    assert [op.out.element_type for op in fp16.model.parameters()] == ["f32"]
    float_bytes = sum(op.value.nbytes for op in fp32.model.ops if op.type == "Const" and op.value.dtype.kind == "f")
    size32, size16 = (os.path.getsize(r.xml[:-4] + ".bin") for r in (fp32, fp16))
    assert size32 - size16 == float_bytes // 2
    # the runtime sees the decompression marks
    converts = [n for n in fp16.ov_model.get_ordered_ops() if n.get_type_name() == "Convert"]
    assert converts and all("decompression_0" in n.get_rt_info() for n in converts)  # name_version


def test_fp16_is_the_fp32_network_with_rounded_weights(ov_core, small_nets, tmp_path):
    proto, weights = small_nets["conv_bn_scale"]
    network = convert_api(input_model=weights, input_proto=proto, disable_fusing=True)
    fp16 = compile_v11(ov_core, network, tmp_path, data_type="FP16", name="fp16")
    for layer in network.layers:
        layer.blobs = {k: np.asarray(v).astype(np.float16).astype(np.float32) for k, v in layer.blobs.items()}
    rounded = compile_v11(ov_core, network, tmp_path, name="rounded")
    x = {"data": np.random.default_rng(5).standard_normal((1, 3, 10, 10)).astype(np.float32)}
    a, b = fp16.infer(x), rounded.infer(x)
    for name in b:
        assert_close(a[name], b[name], 1e-6, name)


def test_float16_blobs_of_the_network_are_stored_as_they_are(ov_core, small_nets, tmp_path):
    """A network whose blobs already are float16 (an FP16 conversion) needs no
    --data_type: the f16 constants get their Converts, f32 ones stay f32."""
    proto, weights = small_nets["conv_bn_scale"]
    network = convert_api(input_model=weights, input_proto=proto)
    for layer in network.layers:
        layer.blobs = {k: np.asarray(v).astype(np.float16) for k, v in layer.blobs.items()}
    run = compile_v11(ov_core, network, tmp_path)
    types = {op.out.element_type for op in run.model.ops if op.type == "Const" and op.value.dtype.kind == "f"}
    assert "f16" in types
    assert sum(op.type == "Convert" and op.rt_info == ["decompression"] for op in run.model.ops) == sum(
        op.type == "Const" and op.out.element_type == "f16" for op in run.model.ops)


def test_fp16_clipping_warnings_name_the_constant():
    layers = [Layer(0, "data", "Input", outputs=[Port(0, (1, 2))]),
              Layer(1, "ss", "ScaleShift", inputs=[Port(0, (1, 2))], outputs=[Port(1, (1, 2))],
                    blobs={"weights": np.array([1e6, 1e-9], np.float32)})]
    _, warnings = build_model(Network("clip", layers, [Edge(0, 0, 1, 0)]), data_type="FP16")
    assert len(warnings) == 2
    assert "clipped to infinity" in warnings[0] and "[ss/weights]" in warnings[0] and "#75" in warnings[0]
    assert "clipped to zero" in warnings[1] and "#76" in warnings[1]
