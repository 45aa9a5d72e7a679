"""--data_type FP16: blobs become float16, layers say FP16, clipping is reported."""

import numpy as np

from ir import Edge, Layer, Network, Port, read_ir, to_xml_string, write_ir


def _net_with_weights(values):
    return Network("half", [
        Layer(0, "in", "Input", outputs=[Port(0, (1, 2))]),
        Layer(1, "fc/weird", "FullyConnected", data={"out-size": "2"},
              inputs=[Port(0, (1, 2))], outputs=[Port(1, (1, 2))],
              blobs={"weights": np.asarray(values, np.float32), "biases": np.array([0.5, -2], np.float32)}),
    ], [Edge(0, 0, 1, 0)])


def test_fp16_values_and_precision_attribute(tmp_path, sample_net):
    xml = tmp_path / "h.xml"
    assert write_ir(sample_net, xml, precision="FP16") == []
    text = xml.read_text()
    assert 'precision="FP32"' not in text
    assert text.count('precision="FP16"') == len(sample_net.layers)
    assert '<weights offset="0" size="216"/>' in text and '<biases offset="216" size="8"/>' in text

    back = read_ir(xml)
    conv = back.layer_by_name("conv1")
    orig = sample_net.layer_by_name("conv1")
    assert conv.precision == "FP16" and conv.blobs["weights"].dtype == np.float16
    assert np.array_equal(conv.blobs["weights"], orig.blobs["weights"].astype(np.float16).ravel())
    assert np.array_equal(conv.blobs["biases"], orig.blobs["biases"].astype(np.float16))
    assert xml.with_suffix(".bin").stat().st_size == (108 + 4) * 2


def test_fp16_clipping_warnings(tmp_path):
    values = [1e5, -7e4, 65504.0, np.inf, 1e-9, -1e-10, 0.0, 1.0, 6e-8]
    net = _net_with_weights(values)
    warnings = write_ir(net, tmp_path / "c.xml", precision="FP16")
    # 1e5 and -7e4 overflow (65504 fits, inf was already inf); 1e-9 and -1e-10
    # underflow to zero (6e-8 rounds to the smallest subnormal, 0.0 was zero already).
    assert warnings == [
        "2 elements of 9 were clipped to infinity while converting a blob for node [fc/weird] to float16. "
        "For more information please refer to Model Optimizer FAQ, question #75.",
        "2 elements of 9 were clipped to zero while converting a blob for node [fc/weird] to float16. "
        "For more information please refer to Model Optimizer FAQ, question #76.",
    ]
    # every stored value, as float16 bit patterns worked out by hand (not by the numpy
    # conversion the writer uses): overflow to +-inf, 65504 kept, inf kept, underflow
    # to +0 and -0 (the sign survives), 0, 1.0, and 6e-8 rounded to the smallest
    # subnormal 2^-24; then the biases 0.5 and -2
    raw = np.fromfile(tmp_path / "c.bin", dtype="<u2")
    assert raw.tolist() == [0x7C00, 0xFC00, 0x7BFF, 0x7C00, 0x0000, 0x8000, 0x0000, 0x3C00, 0x0001, 0x3800, 0xC000]
    got = read_ir(tmp_path / "c.xml").layer_by_name("fc/weird").blobs["weights"]
    assert got.dtype == np.float16 and got.view("<u2").tolist() == raw[:9].tolist()


def test_fp32_output_has_no_warnings_and_keeps_values(tmp_path):
    values = [1e5, 1e-9]
    assert write_ir(_net_with_weights(values), tmp_path / "f.xml") == []
    got = read_ir(tmp_path / "f.xml").layers[1].blobs["weights"]
    assert got.tolist() == np.asarray(values, np.float32).tolist()


def test_float64_blobs_are_stored_in_the_layer_precision():
    net = _net_with_weights([1.0, 2.0])
    net.layers[1].blobs["weights"] = np.array([1.0, 2.0])  # float64
    assert '<weights offset="0" size="8"/>' in to_xml_string(net)
    assert '<weights offset="0" size="4"/>' in to_xml_string(net, "FP16")
