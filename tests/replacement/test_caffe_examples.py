"""The reference guide's replacement examples on Caffe nets the tests build, run on
the CPU daemon against real pycaffe:
- MVN by isomorphism pattern: Caffe's MVN spelled out in eleven elementary layers
  becomes one IR MVN layer, equal to pycaffe's own MVN layer (and to the spelled-out
  net) within 1e-4 (without the pattern the layers convert one by one, equal too);
- op replacement: brocolli-Caffe's HardSwish, unknown to the converter, becomes
  Power, Clamp, Power and an Eltwise product, equal to pycaffe's HardSwish.
"""
import os

import numpy as np
import pytest

from core.errors import Error
from tests.replacement.caffe_nets import HARD_SWISH, MVN_DECOMPOSED, MVN_LAYER
from tests.replacement.conftest import EXT
from tests.support import caffe_outputs, compare_with_caffe, convert_api, make_caffemodel, write_text

MVN_EXT = os.path.join(EXT, "mvn_pattern")
HARD_SWISH_EXT = os.path.join(EXT, "hard_swish")


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    d = tmp_path_factory.mktemp("replacement_nets")
    result = {}
    for name, text in (("mvn_decomposed", MVN_DECOMPOSED), ("mvn_layer", MVN_LAYER), ("hard_swish", HARD_SWISH)):
        proto = write_text(str(d / (name + ".prototxt")), text)
        result[name] = proto
    weights = str(d / "mvn.caffemodel")
    make_caffemodel(result["mvn_decomposed"], weights, seed=3, scale=0.3)
    result["mvn_weights"] = weights
    weights = str(d / "hard_swish.caffemodel")
    make_caffemodel(result["hard_swish"], weights, seed=4, scale=0.5)
    result["hard_swish_weights"] = weights
    return result


def run_ir(ie, network, tmp_path, inputs):
    from ir import write_ir
    xml = str(tmp_path / "model.xml")
    write_ir(network, xml)
    exec_net = ie.load_network(ie.read_network(model=xml), "CPU")
    try:
        return exec_net.infer(inputs)
    finally:
        exec_net.close()


def data(seed=7):
    return {"data": np.random.default_rng(seed).standard_normal((2, 3, 10, 10)).astype(np.float32) * 3}


def test_mvn_pattern_becomes_one_mvn_layer_equal_to_pycaffe_mvn(ie, nets, tmp_path):
    network = convert_api(input_model=nets["mvn_weights"], input_proto=nets["mvn_decomposed"], extensions=MVN_EXT)
    types = [layer.type for layer in network.layers]
    assert types.count("MVN") == 1, types
    assert not {"Pooling", "Power", "Eltwise"} & set(types), types
    mvn = next(layer for layer in network.layers if layer.type == "MVN")
    assert mvn.data["normalize_variance"] == "1" and mvn.data["across_channels"] == "0"
    assert float(mvn.data["eps"]) == pytest.approx(1e-9)
    inputs = data()
    ours = run_ir(ie, network, tmp_path, inputs)
    # pycaffe's own MVN layer, and the spelled-out net, on the same weights and input
    compare_with_caffe(ours, caffe_outputs(nets["mvn_layer"], nets["mvn_weights"], inputs), 1e-4)
    compare_with_caffe(ours, caffe_outputs(nets["mvn_decomposed"], nets["mvn_weights"], inputs), 1e-4)


def test_without_the_pattern_the_spelled_out_net_converts_layer_by_layer(ie, nets, tmp_path):
    """Without the replacement the eleven layers convert one by one: the two-bottom
    Bias/Scale broadcast their [N, C] input over [N, C, H, W] as Caffe does (a Reshape
    and Tiles before each Eltwise) - equal to pycaffe too, in many more layers."""
    network = convert_api(input_model=nets["mvn_weights"], input_proto=nets["mvn_decomposed"])
    types = [layer.type for layer in network.layers]
    assert "MVN" not in types and "Tile" in types and "Eltwise" in types, types
    inputs = data()
    ours = run_ir(ie, network, tmp_path, inputs)
    compare_with_caffe(ours, caffe_outputs(nets["mvn_decomposed"], nets["mvn_weights"], inputs), 1e-4)


def test_hard_swish_op_replacement_equals_pycaffe(ie, nets, tmp_path):
    network = convert_api(input_model=nets["hard_swish_weights"], input_proto=nets["hard_swish"],
                          extensions=HARD_SWISH_EXT)
    types = [layer.type for layer in network.layers]
    assert "HardSwish" not in types and "Clamp" in types and "Eltwise" in types, types
    inputs = data(8)
    ours = run_ir(ie, network, tmp_path, inputs)
    compare_with_caffe(ours, caffe_outputs(nets["hard_swish"], nets["hard_swish_weights"], inputs), 1e-4)


def test_without_the_replacer_hard_swish_is_an_unsupported_layer(nets):
    with pytest.raises(Error) as info:
        convert_api(input_model=nets["hard_swish_weights"], input_proto=nets["hard_swish"])
    assert "HardSwish (1 layer): \"hswish\"" in str(info.value) and info.value.faq == 44
