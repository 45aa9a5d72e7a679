"""--data_type is a pipeline pass (core/middle/precision.py): convert() returns the
network in the asked precision and the writer writes exactly that."""
import numpy as np

from ir import read_ir, write_ir
from tests.caffe_models import make_caffemodel
from tests.support import convert_api, run_cli, write_text

NET = """name: "tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 4 dim: 4 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 3 kernel_size: 1 } }
"""
# overflows (1e5, -7e4), fits (65504), underflows (1e-9, -1e-10), the smallest subnormal (6e-8)
WEIGHTS = np.array([1e5, -7e4, 65504.0, 1e-9, -1e-10, 0.0, 1.0, 6e-8, 0.1], np.float32).reshape(3, 3, 1, 1)
BIASES = np.array([0.5, -2.0, 3.0], np.float32)


def model(tmp_path):
    proto = write_text(str(tmp_path / "tiny.prototxt"), NET)
    weights = str(tmp_path / "tiny.caffemodel")
    make_caffemodel(proto, weights, blobs={"conv": [WEIGHTS, BIASES]})
    return proto, weights


def test_the_converted_network_holds_float16(tmp_path):
    proto, weights = model(tmp_path)
    half = convert_api(input_model=weights, input_proto=proto, data_type="FP16")
    conv = half.layer_by_name("conv")
    assert {layer.precision for layer in half.layers} == {"FP16"}
    assert conv.blobs["weights"].dtype == np.float16
    # written as it is: no precision argument, the network says FP16
    write_ir(half, str(tmp_path / "h.xml"))
    raw = np.fromfile(str(tmp_path / "h.bin"), dtype="<u2")
    # float16 bit patterns worked out by hand: inf, -inf, 65504, +0, -0, 0, 1.0, 2^-24, 0.1 (0x2E66), then biases
    assert raw.tolist() == [0x7C00, 0xFC00, 0x7BFF, 0x0000, 0x8000, 0x0000, 0x3C00, 0x0001, 0x2E66,
                            0x3800, 0xC000, 0x4200]
    assert read_ir(str(tmp_path / "h.xml")).layer_by_name("conv").precision == "FP16"


def test_cli_fp16_reports_clipping_with_the_faq_numbers(tmp_path):
    proto, weights = model(tmp_path)
    code, out, err = run_cli("convert", "--input_model", weights, "--input_proto", proto, "--data_type", "FP16",
                             "--output_dir", str(tmp_path / "out"))
    assert code == 0, err
    assert ("[ WARNING ]  2 elements of 9 were clipped to infinity while converting a blob for node [conv] to "
            "float16. For more information please refer to Model Optimizer FAQ, question #75.") in out
    assert ("[ WARNING ]  2 elements of 9 were clipped to zero while converting a blob for node [conv] to "
            "float16. For more information please refer to Model Optimizer FAQ, question #76.") in out
    assert (tmp_path / "out" / "tiny.bin").stat().st_size == (9 + 3) * 2


def test_fp32_keeps_every_value(tmp_path):
    proto, weights = model(tmp_path)
    full = convert_api(input_model=weights, input_proto=proto)
    assert {layer.precision for layer in full.layers} == {"FP32"}
    assert np.array_equal(full.layer_by_name("conv").blobs["weights"], WEIGHTS.ravel())
