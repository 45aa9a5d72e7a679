"""The converter's options with their TensorFlow meaning, checked numerically against
TensorFlow on the CPU daemon: cutting by TF node names (NODE, NODE:PORT, PORT:NODE,
--output), -b 2, --input_shape in NHWC, --mean_values / --scale_values / --scale /
--reverse_input_channels on the same preprocessing done before TensorFlow,
--disable_fusing, --disable_nhwc_to_nchw, --extensions with a front/tf extractor,
--model_name."""
import os

import numpy as np
import pytest

from ir import read_ir
from tests.support import REPO, run_cli
from tests.tf.tf_helpers import compare_with_tf, convert_model, rel_err, run_on_daemon

EXT = os.path.join(REPO, "tests", "tf", "erf_ext")


def run(ie, xml, feeds, nhwc_io=False):
    return run_on_daemon(ie, xml, feeds, nhwc_io)[1]


# --- cutting ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cutting(tf_graphs):
    arrays = tf_graphs.arrays("cutting")
    return tf_graphs.path("cutting"), {"x": arrays["in1/x"], "relu1": arrays["intermediate/0"],
                                       "conv2": arrays["intermediate/1"], "pool": arrays["out1/0"]}


def test_output_by_node_name(ie, cutting, tmp_path):
    pb, t = cutting
    xml = convert_model(pb, tmp_path, "m", batch=1, output="conv2")
    assert [l.type for l in read_ir(xml).layers] == ["Input", "Convolution", "ReLU", "Convolution"]
    assert rel_err(run(ie, xml, {"x": t["x"]})["conv2"], t["conv2"]) < 1e-5


@pytest.mark.parametrize("keep_nhwc", [False, True])
def test_an_output_that_other_layers_also_read(ie, cutting, tmp_path, keep_nhwc):
    """--output relu1,pool: relu1 is read by conv2 on the way to pool. IR v2 lists as outputs the
    tensors nothing reads; the IR says this one in <results> (it was dropped, with a warning that
    advised the very --output given), IR v11 puts a Result on it; with NHWC kept, conv2 still
    reads relu1 in NCHW."""
    import openvino as ov
    from tests.tf.tf_helpers import nchw, nhwc
    pb, t = cutting
    xml = convert_model(pb, tmp_path / "v2", "m", batch=1, output="relu1,pool", disable_nhwc_to_nchw=keep_nhwc)
    net = read_ir(xml)
    # (with NHWC kept, the output is the Permute back to NHWC, which nothing else reads)
    assert [net.layer_by_id(layer).name for layer, _ in net.results] == ([] if keep_nhwc else ["relu1"])
    out = run(ie, xml, {"x": t["x"]}, nhwc_io=keep_nhwc)
    assert sorted(out) == ["pool", "relu1"]
    assert rel_err(out["relu1"], t["relu1"]) < 1e-5 and rel_err(out["pool"], t["pool"]) < 1e-5
    code, stdout, stderr = run_cli("convert", "--input_model", pb, "-b", "1", "--output", "relu1,pool", "--ir_version",
                                   "11", "--output_dir", str(tmp_path / "v11"), "--model_name", "m",
                                   *(["--disable_nhwc_to_nchw"] if keep_nhwc else []))
    assert code == 0 and "WARNING" not in stdout + stderr, stdout + stderr
    compiled = ov.Core().compile_model(str(tmp_path / "v11" / "m.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = compiled({0: t["x"] if keep_nhwc else nchw(t["x"])})
    got = {name: res[o] for o in compiled.outputs for name in o.get_names()}
    for name in ("relu1", "pool"):
        assert rel_err(got[name] if keep_nhwc else nhwc(got[name]), t[name]) < 1e-5


def test_input_node_feeds_its_data_port_not_its_weights(ie, cutting, tmp_path):
    pb, t = cutting
    xml = convert_model(pb, tmp_path, "m", batch=1, input="conv2")  # shape inferred from the model before the cut
    net = read_ir(xml)
    assert [l.name for l in net.inputs()] == ["conv2/placeholder_port_0"]
    assert net.inputs()[0].outputs[0].dims == (1, 4, 8, 8)
    out = run(ie, xml, {"conv2/placeholder_port_0": t["relu1"]})
    assert rel_err(out["pool"], t["pool"]) < 1e-5


def test_input_output_port_of_a_node(ie, cutting, tmp_path):
    pb, t = cutting
    xml = convert_model(pb, tmp_path, "m", batch=1, input="relu1:0")
    out = run(ie, xml, {"relu1/output_port_0": t["relu1"]})
    assert rel_err(out["pool"], t["pool"]) < 1e-5


def test_input_port_of_a_node_with_nhwc_shape(ie, cutting, tmp_path):
    pb, t = cutting
    xml = convert_model(pb, tmp_path, "m", input="0:conv2", input_shape="[1,8,8,4]", output="conv2")
    net = read_ir(xml)
    assert net.inputs()[0].outputs[0].dims == (1, 4, 8, 8)  # given NHWC, the IR is NCHW
    out = run(ie, xml, {"conv2/placeholder_port_0": t["relu1"]})
    assert [l.type for l in net.layers] == ["Input", "Convolution"]
    assert rel_err(out["conv2"], t["conv2"]) < 1e-5


# --- batch and shapes -------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["conv_same_even_stride2", "conv_flatten_dense_softmax", "shape_arithmetic"])
def test_batch_2(ie, tf_graphs, tmp_path, case):
    compare_with_tf(ie, tf_graphs, case, tmp_path, batch=2)


def test_input_shape_is_nhwc(ie, tf_graphs, tmp_path):
    xml = convert_model(tf_graphs.path("conv_same_odd"), tmp_path, "m", input_shape="[1,9,9,3]")
    assert read_ir(xml).inputs()[0].outputs[0].dims == (1, 3, 9, 9)


@pytest.mark.parametrize("case", ["conv_bias_relu", "fused_batch_norm"])
def test_disable_fusing_keeps_scale_shift(ie, tf_graphs, tmp_path, case):
    compare_with_tf(ie, tf_graphs, case, tmp_path, disable_fusing=True)
    types = [l.type for l in read_ir(os.path.join(tmp_path, case + ".xml")).layers]
    assert "ScaleShift" in types, types


# --- preprocessing ------------------------------------------------------------------------
MEAN, SCALE = "[120,110,100]", "[60,50,40]"


@pytest.mark.parametrize("case", ["preprocess_into_conv", "preprocess_padded_conv", "preprocess_no_conv"])
@pytest.mark.parametrize("variant", ["mean_scale", "mean_scale_reversed", "scale255"])
def test_preprocessing_equals_tensorflow_on_preprocessed_input(ie, tf_graphs, tmp_path, case, variant):
    arrays = tf_graphs.arrays(case)
    options = {"mean_scale": {"mean_values": MEAN, "scale_values": SCALE},
               "mean_scale_reversed": {"mean_values": MEAN, "scale_values": SCALE, "reverse_input_channels": True},
               "scale255": {"scale": 255.0}}[variant]
    xml = convert_model(tf_graphs.path(case), tmp_path, "m", batch=1, **options)
    types = [l.type for l in read_ir(xml).layers]
    if case == "preprocess_into_conv":  # folded into the first convolution
        assert types == ["Input", "Convolution"], types
    out = run(ie, xml, {"x": arrays["raw/in/x"]})  # the IR takes the raw image
    name = tf_graphs.meta(case)["outputs"][0]
    assert rel_err(out[name], arrays[variant + "/0"]) < 1e-5


# --- layout at the boundary ------------------------------------------------------------------
@pytest.mark.parametrize("case", ["conv_flatten_dense_softmax", "two_inputs_two_outputs", "resize_nearest"])
def test_disable_nhwc_to_nchw_keeps_nhwc_inputs_and_outputs(ie, tf_graphs, tmp_path, case):
    compare_with_tf(ie, tf_graphs, case, tmp_path, nhwc_io=True)
    net = read_ir(os.path.join(tmp_path, case + ".xml"))
    for layer in net.inputs():
        assert list(layer.outputs[0].dims) == tf_graphs.meta(case)["inputs"][layer.name]


# --- extensions, names -------------------------------------------------------------------------
def test_extension_for_a_tf_op(ie, tf_graphs, tmp_path):
    ie.add_extension(os.path.join(EXT, "erf_kernel.py"), "CPU")
    compare_with_tf(ie, tf_graphs, "erf_extension", tmp_path, extensions=EXT)
    assert "Erf" in [l.type for l in read_ir(os.path.join(tmp_path, "erf_extension.xml")).layers]


def test_without_the_extension_erf_is_native(ie, tf_graphs, tmp_path):
    """The extension above replaces the built-in Erf; without it Erf is an Activation of the IR."""
    compare_with_tf(ie, tf_graphs, "erf_extension", tmp_path)
    layers = read_ir(os.path.join(tmp_path, "erf_extension.xml")).layers
    assert [layer.data.get("type") for layer in layers if layer.type == "Activation"] == ["erf"]


@pytest.mark.parametrize("case,gelus,erfs", [("gelu_forms", ["erf", "tanh", "erf", "erf"], 0),
                                              ("erf_erfc_not_gelu", [], 4)])
def test_gelu_sub_graphs_are_one_layer(ie, tf_graphs, tmp_path, case, gelus, erfs):
    """Every GELU form is one Activation gelu (its approximation kept); a product that is not GELU, or
    whose gate something else reads, stays as it is (Erfc: erf then Power)."""
    compare_with_tf(ie, tf_graphs, case, tmp_path)
    activations = [layer for layer in read_ir(os.path.join(tmp_path, case + ".xml")).layers
                   if layer.type == "Activation"]
    assert [a.data.get("approximation_mode") for a in activations if a.data.get("type") == "gelu"] == gelus
    assert sum(a.data.get("type") == "erf" for a in activations) == erfs
    assert {a.data.get("type") for a in activations} <= {"gelu", "erf"}


def test_keras_layer_normalization_is_one_layer(ie, tf_graphs, tmp_path):
    """With and without gamma / beta, on the last axis of a 3-D or a 4-D (NCHW: axis 1) tensor."""
    compare_with_tf(ie, tf_graphs, "layer_norm", tmp_path)
    layers = read_ir(os.path.join(tmp_path, "layer_norm.xml")).layers
    norms = [layer for layer in layers if layer.type == "LayerNorm"]
    assert sorted((n.data["axis"], sorted(n.blobs)) for n in norms) == [
        ("1", ["biases", "weights"]), ("2", ["biases"]), ("2", ["biases", "weights"]), ("2", ["weights"])]
    assert not {"ReduceMean", "Eltwise", "Power"} & {layer.type for layer in layers}


def test_model_name_and_cli(tf_graphs, tmp_path):
    code, out, err = run_cli("convert", "--input_model", tf_graphs.path("conv_bias_relu"), "-b", "1",
                             "--model_name", "named", "--output_dir", str(tmp_path))
    assert code == 0, err
    assert os.path.isfile(tmp_path / "named.xml") and os.path.isfile(tmp_path / "named.bin")
    net = read_ir(str(tmp_path / "named.xml"))
    assert net.name == "named" and net.meta["framework"] == "tf"
    assert [l.type for l in net.layers] == ["Input", "Convolution", "ReLU"]
    assert np.array_equal(net.inputs()[0].outputs[0].dims, (1, 3, 8, 8))
