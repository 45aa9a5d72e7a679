"""Model cutting with --input/--output/--input_shape, as the reference guide's
Inception V1 walk-through describes, on the Caffe GoogLeNet."""
import pytest

from core.errors import Error
from tests.support import convert_api

CONV, RELU = "conv1/7x7_s2", "conv1/relu_7x7"


@pytest.fixture(scope="module")
def googlenet(own_models):
    proto, weights = own_models["bvlc_googlenet"]
    return dict(input_model=weights, input_proto=proto)


def layers(network):
    return [(layer.name, layer.type, [tuple(p.dims) for p in layer.outputs]) for layer in network.layers]


def edges(network):
    return [(e.from_layer, e.from_port, e.to_layer, e.to_port) for e in network.edges]


@pytest.mark.parametrize("output", [RELU, RELU + ":0"])
def test_cut_at_the_end_keeps_three_layers(googlenet, output):
    net = convert_api(**googlenet, batch=1, output=output)
    assert layers(net) == [("data", "Input", [(1, 3, 224, 224)]),
                           (CONV, "Convolution", [(1, 64, 112, 112)]),
                           (RELU, "ReLU", [(1, 64, 112, 112)])]
    assert edges(net) == [(0, 0, 1, 0), (1, 3, 2, 0)]


def test_cut_input_edge_of_output_drops_the_node(googlenet):
    net = convert_api(**googlenet, batch=1, output="0:" + RELU)
    assert [name for name, _, _ in layers(net)] == ["data", CONV]


@pytest.mark.parametrize("inp", [RELU, "0:" + RELU])
def test_cut_from_the_beginning_infers_the_shape(googlenet, inp):
    net = convert_api(**googlenet, batch=1, output=RELU, input=inp)
    assert layers(net) == [(RELU + "/placeholder_port_0", "Input", [(1, 64, 112, 112)]),
                           (RELU, "ReLU", [(1, 64, 112, 112)])]
    assert edges(net) == [(0, 0, 1, 0)]


def test_shape_override_for_a_new_input(googlenet):
    net = convert_api(**googlenet, input_shape="[1,5,10,20]", output=RELU, input=RELU)
    assert layers(net) == [(RELU + "/placeholder_port_0", "Input", [(1, 5, 10, 20)]),
                           (RELU, "ReLU", [(1, 5, 10, 20)])]


@pytest.mark.parametrize("inp", [RELU + "[1,5,10,20]", RELU + "[1 5 10 20]{f32}", "0:" + RELU + "[1,5,10,20]"])
def test_shape_given_in_the_input_entry(googlenet, inp):
    """mo's NAME[SHAPE]{TYPE} form of --input."""
    net = convert_api(**googlenet, output=RELU, input=inp)
    assert layers(net) == [(RELU + "/placeholder_port_0", "Input", [(1, 5, 10, 20)]),
                           (RELU, "ReLU", [(1, 5, 10, 20)])]
    with pytest.raises(Error) as err:
        convert_api(**googlenet, output=RELU, input=inp, input_shape="[1,5,10,20]")
    assert err.value.faq == 57 and "both in --input and with --input_shape" in str(err.value)


def test_an_input_that_the_outputs_cut_away_is_left_out(googlenet, caplog):
    """mo's behaviour: --input naming a node no kept output needs is left out, with a warning (it said the
    node does not exist)."""
    with caplog.at_level("WARNING", logger="mo_core"):
        net = convert_api(**googlenet, batch=1, output=RELU, input="data,pool5/7x7_s1")
    assert [name for name, _, _ in layers(net)] == ["data", CONV, RELU]
    assert "--input names 'pool5/7x7_s1', which feeds none of the outputs" in caplog.text


def test_input_on_the_first_convolution_equals_the_whole_model(googlenet, tmp_path):
    from ir import to_xml_string
    whole = convert_api(**googlenet, batch=1)
    cut = convert_api(**googlenet, batch=1, input=CONV)
    assert [layer.name for layer in cut.layers][1:] == [layer.name for layer in whole.layers][1:]
    assert cut.layers[0].name == CONV + "/placeholder_port_0"
    assert layers(cut)[1:] == layers(whole)[1:]
    # with an explicit port and a shape it works as well (FAQ #30 asks for exactly this)
    net = convert_api(**googlenet, input="0:" + CONV, input_shape="[1,3,224,224]")
    assert layers(net)[1:] == layers(whole)[1:]
    assert to_xml_string(whole).count("<layer ") == len(whole.layers)


def test_several_dynamic_inputs_and_a_shape_need_a_port(googlenet):
    with pytest.raises(Error) as err:
        convert_api(**googlenet, input="inception_3a/output", input_shape="[1,64,28,28]")
    assert err.value.faq == 30 and "more than 1 input" in str(err.value)


def test_output_port_of_a_node_as_input(googlenet):
    net = convert_api(**googlenet, batch=1, input="pool1/3x3_s2:0", output="pool1/norm1")
    assert layers(net) == [("pool1/3x3_s2/output_port_0", "Input", [(1, 64, 56, 56)]),
                           ("pool1/norm1", "Norm", [(1, 64, 56, 56)])]


def test_cut_keeps_a_middle_branch_and_multiple_outputs(googlenet):
    net = convert_api(**googlenet, batch=2, input="data,inception_3a/1x1",
                      output="inception_3a/relu_1x1,pool2/3x3_s2")
    names = [layer.name for layer in net.layers]
    assert "inception_3a/1x1/placeholder_port_0" in names and "inception_3a/relu_1x1" in names
    assert "data" in names  # pool2 needs the original input: it is listed and stays
    assert "inception_3a/3x3" not in names
    assert net.layer_by_name("inception_3a/1x1/placeholder_port_0").outputs[0].dims == (2, 192, 28, 28)


def test_missing_inputs_for_the_outputs_are_reported(googlenet):
    with pytest.raises(Error) as err:
        convert_api(**googlenet, batch=1, input="inception_3a/1x1", output="inception_3a/output")
    assert err.value.faq == 26


def test_several_inputs_with_shapes(tmp_path):
    from tests.caffe_models import make_caffemodel
    from tests.support import write_text
    proto = write_text(str(tmp_path / "two.prototxt"), """
input: "a"
input_shape { dim: 1 dim: 2 dim: 4 dim: 4 }
input: "b"
input_shape { dim: 1 dim: 3 }
layer { name: "conv" type: "Convolution" bottom: "a" top: "conv" convolution_param { num_output: 3 kernel_size: 3 } }
layer { name: "fc" type: "InnerProduct" bottom: "b" top: "fc" inner_product_param { num_output: 5 } }
""")
    weights = str(tmp_path / "two.caffemodel")
    make_caffemodel(proto, weights)
    net = convert_api(input_model=weights, input_proto=proto, input="a,b", input_shape="(2,2,6,6),[2,3]")
    shapes = {layer.name: layer.outputs[0].dims for layer in net.layers}
    assert shapes == {"a": (2, 2, 6, 6), "b": (2, 3), "conv": (2, 3, 4, 4), "fc": (2, 5)}
    net = convert_api(input_model=weights, input_proto=proto, input="b,a", input_shape="[4,3],[4,2,5,5]")
    assert {layer.name: layer.outputs[0].dims for layer in net.layers}["conv"] == (4, 3, 3, 3)
    with pytest.raises(Error) as err:
        convert_api(input_model=weights, input_proto=proto, input_shape="(2,2,6,6),[2,3]")
    assert err.value.faq == 57
    with pytest.raises(Error) as err:
        convert_api(input_model=weights, input_proto=proto, input_shape="(2,2,6,6)")
    assert err.value.faq == 31
    with pytest.raises(Error) as err:  # two inputs: unnamed mean values are ambiguous
        convert_api(input_model=weights, input_proto=proto, mean_values="(1,2)")
    assert err.value.faq == 60
    net = convert_api(input_model=weights, input_proto=proto, mean_values="a[1,2]", disable_fusing=True)
    assert [layer.type for layer in net.layers].count("ScaleShift") == 1
