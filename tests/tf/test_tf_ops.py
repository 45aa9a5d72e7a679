"""One small TensorFlow graph per op / attribute case (tests/tf/graphs.py), converted
without TensorFlow and run on the CPU daemon: equal to TensorFlow within 1e-4
relative (FP32) and 1e-2 (FP16 IR), outputs compared after NCHW -> NHWC."""
import os
import re

import numpy as np

import pytest

from tests.tf.tf_helpers import compare_with_tf

with open(os.path.join(os.path.dirname(__file__), "graphs.py")) as _f:
    ALL = re.findall(r'^@case\("(\w+)"', _f.read(), re.M)
# needing an option to convert: tested in test_tf_options.py
SPECIAL = {"erf_extension"}
CASES = [c for c in ALL if c not in SPECIAL]


def test_there_are_enough_cases(tf_graphs):
    assert len(CASES) >= 30
    assert sorted(tf_graphs.index) == sorted(ALL)


@pytest.mark.parametrize("case", CASES)
def test_fp32_equals_tensorflow(ie, tf_graphs, tmp_path, case):
    compare_with_tf(ie, tf_graphs, case, tmp_path)


@pytest.mark.parametrize("case", CASES)
def test_fp16_ir_equals_tensorflow(ie, tf_graphs, tmp_path, case):
    compare_with_tf(ie, tf_graphs, case, tmp_path, data_type="FP16", tol=1e-2)


@pytest.mark.parametrize("case", ["conv_transpose_output_padding", "gelu_forms", "erf_erfc_not_gelu",
                                  "batch_matmul", "attention_einsum", "layer_norm", "named_identity_output",
                                  "causal_select", "dense_bias_moves", "convnext_block", "attention_heads",
                                  "embedding_lookup", "keras_embedding", "gather_of_data", "plain_functions",
                                  "math_functions", "cumsum_positions", "narrow_and_bool_casts", "gather_data_by_data",
                                  "gather_batch_dims", "reverse_roll", "log_softmax_softsign", "top_k",
                                  "one_hot_float_classes", "crop_and_resize", "gather_nd", "fake_quant",
                                  "resize_bicubic", "atan2_div_no_nan", "legacy_tf1_ops", "floor_div_mod",
                                  "extract_patches", "conv3d_pool3d", "conv3d_zero_padding", "conv3d_transpose",
                                  "conv3d_batch_norm_global_pool", "keras_recurrent", "counted_loops", "concat_cells",
                                  "keras_masked_lstm", "keras_conv_lstm",
                                  "lrn_selu_depth_space",
                                  "argmin_ties_broadcast"])
def test_as_ir_v11_on_openvino(tf_graphs, tmp_path, case):
    """IR v11 on the OpenVINO runtime too: the uncovered border (Deconvolution + Pad); Gelu-7 and Erf; MatMul; the
    Results in the model's order of outputs (compiled_model(x)[i] is TensorFlow's output i, as with mo)."""
    import numpy as np
    import openvino as ov
    from tests.support import run_cli
    from tests.tf.tf_helpers import nchw, nhwc, rel_err
    code, out, err = run_cli("convert", "--input_model", tf_graphs.path(case), "-b", "1", "--ir_version", "11",
                             "--output_dir", str(tmp_path), "--model_name", case)
    assert code == 0, out + err
    arrays = tf_graphs.arrays(case)
    compiled = ov.Core().compile_model(str(tmp_path / (case + ".xml")), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled({0: nchw(arrays["in1/x"])})
    # TensorFlow's tensor name (a node's first output also by the node's name), as mo names them
    tensors = [t if ":" in t else t + ":0" for t in tf_graphs.meta(case)["outputs"]]
    expected = [{t} | ({t[:-2]} if t.endswith(":0") else set()) for t in tensors]
    assert all(names <= port.get_names() for names, port in zip(expected, compiled.outputs, strict=True)), [
        port.get_names() for port in compiled.outputs]  # (OpenVINO merges equal Erf ops: their names join)
    for i, port in enumerate(compiled.outputs):
        assert rel_err(nhwc(np.asarray(results[port])), arrays["out1/{}".format(i)]) < 1e-5, tensors[i]
    if case == "named_identity_output":  # (and the names of the Identity nodes that passed it on)
        assert {"named:0", "Identity:0"} <= compiled.outputs[0].get_names()


def test_biases_fold_through_moves_and_layout_permutes_cancel(tf_graphs, tmp_path):
    """core/middle/move_fold.py on Keras' patterns (the outputs equal TensorFlow's in the tests above): no Const
    or ScaleShift per request for a bias or scale that is one per output channel of a FullyConnected, whatever
    Reshapes and Permutes stand between; the Permutes around GELU gone; ConvNeXt's LayerNorm over the innermost
    axis (oneDNN's kernel); a bias per row is no FC bias and stays an Eltwise with its Const."""
    from ir import read_ir
    from tests.tf.tf_helpers import convert_model
    net = read_ir(convert_model(tf_graphs.path("dense_bias_moves"), tmp_path, "dense_bias_moves", batch=1))
    types = [layer.type for layer in net.layers]
    assert types.count("Const") == 1 and types.count("Eltwise") == 1 and "ScaleShift" not in types, types
    net = read_ir(convert_model(tf_graphs.path("convnext_block"), tmp_path, "convnext_block", batch=1))
    types = [layer.type for layer in net.layers]
    assert "Const" not in types and "ScaleShift" not in types and types.count("Eltwise") == 1, types
    assert types.count("Permute") == 2, types  # into the channels-last LayerNorm, back for the residual sum
    norm = next(layer for layer in net.layers if layer.type == "LayerNorm")
    assert int(norm.data["axis"]) == len(norm.outputs[0].dims) - 1
    gelu = next(layer for layer in net.layers if layer.data.get("type") == "gelu")
    feeding = [net.layer_by_id(e.from_layer).type for e in net.edges if e.to_layer == gelu.id]
    assert feeding == ["FullyConnected"]  # (its post-op on oneDNN)


def test_volume_layers_keep_ncdhw_between_them(tf_graphs, tmp_path):
    """Conv3D and the 3-D pools are NCDHW layers between Permutes from and back to TensorFlow's NDHWC
    (core/front/tf/ops/volume.py), and the model's 5-D inputs and outputs are NCDHW (as the reference made them,
    as 4-D ones are NCHW): every Permute cancels - the four readers' equal Permutes merge, then meet the
    convolution's across the ReLU; an output's moves up past the ReLU, which takes the output's name. The bias
    and a per-channel scale (a batch normalization) fold into the convolution or transposed convolution, the zero
    Pads into the layers' padding, a reduction over D, H and W is a global 3-D pooling."""
    from ir import read_ir
    from tests.tf.tf_helpers import convert_model
    cases = {"conv3d_pool3d": "Convolution", "conv3d_zero_padding": "Convolution",
             "conv3d_batch_norm_global_pool": "Convolution", "conv3d_transpose": "Deconvolution"}
    nets = {case: read_ir(convert_model(tf_graphs.path(case), tmp_path, case, batch=1)) for case in cases}
    for case, net in nets.items():
        types = [layer.type for layer in net.layers]
        assert "Permute" not in types and "Eltwise" not in types and "ScaleShift" not in types, (case, types)
        assert "Const" not in types, (case, types)
        first = next(layer for layer in net.layers if layer.type == cases[case])
        assert len(first.data["kernel"].split(",")) == 3, (case, first.data)
    data = next(layer for layer in nets["conv3d_pool3d"].layers if layer.type == "Input")
    assert tuple(data.outputs[0].dims) == (1, 3, 5, 9, 8)  # TensorFlow's (1, 5, 9, 8, 3) as NCDHW
    assert "Pad" not in [layer.type for layer in nets["conv3d_zero_padding"].layers]
    pool = next(layer for layer in nets["conv3d_zero_padding"].layers if layer.type == "Pooling")
    assert pool.data["exclude-pad"] == "false" and pool.data["pads_begin"] == "0,1,1"
    assert [layer.type for layer in nets["conv3d_batch_norm_global_pool"].layers].count("Pooling") == 3
    relu = next(layer for layer in nets["conv3d_transpose"].layers if layer.type == "ReLU")
    assert relu.name == "Relu" and tuple(relu.outputs[0].dims) == (1, 6, 6, 10, 8)  # NCDHW, TensorFlow's name


def test_volumes_with_preprocessing_or_kept_ndhwc(ie, tf_graphs, tmp_path):
    """A 5-D input is NCDHW, so --mean_values, --scale_values and --reverse_input_channels apply to its channels
    (axis 1) as to an image's: fed the TensorFlow input brought back through them, the IR gives TensorFlow's
    outputs. --disable_nhwc_to_nchw keeps the inputs and outputs NDHWC; preprocessing there is a clean error (the
    channels are the last axis)."""
    from ir import read_ir
    from tests.support import assert_clean_failure, run_cli
    from tests.tf.tf_helpers import convert_model, nchw, nhwc, output_key, rel_err
    arrays, meta = tf_graphs.arrays("conv3d_pool3d"), tf_graphs.meta("conv3d_pool3d")
    mean, scale = np.array([1.0, 2.0, 3.0], np.float32), np.array([2.0, 4.0, 0.5], np.float32)
    xml = convert_model(tf_graphs.path("conv3d_pool3d"), tmp_path / "pre", "pre", batch=1,
                        mean_values="[1,2,3]", scale_values="[2,4,0.5]", reverse_input_channels=True)
    x = nchw(arrays["in1/x"])  # what the model sees: (reverse(raw) - mean) / scale
    raw = np.ascontiguousarray((x * scale.reshape(1, 3, 1, 1, 1) + mean.reshape(1, 3, 1, 1, 1))[:, ::-1])
    net = ie.read_network(model=xml)
    exec_net = ie.load_network(net, "CPU")
    try:
        out = exec_net.infer({"x": raw})
    finally:
        exec_net.close()
    for i, name in enumerate(meta["outputs"]):
        assert rel_err(nhwc(np.asarray(out[output_key(xml, out, name)])), arrays[f"out1/{i}"]) < 1e-4, name
    compare_with_tf(ie, tf_graphs, "conv3d_pool3d", tmp_path / "kept", nhwc_io=True)
    kept = read_ir(str(tmp_path / "kept" / "conv3d_pool3d.xml"))
    assert kept.layers[0].outputs[0].dims == (1, 5, 9, 8, 3)  # TensorFlow's NDHWC
    code, stdout, stderr = run_cli("convert", "--input_model", tf_graphs.path("conv3d_pool3d"), "-b", "1",
                                   "--disable_nhwc_to_nchw", "--mean_values", "[1,2,3]", "--output_dir",
                                   str(tmp_path / "bad"))
    assert_clean_failure(code, stdout, stderr, str(tmp_path / "bad"), "kept NDHWC by --disable_nhwc_to_nchw")


def test_a_convnext_block_runs_channels_last_without_copies(tf_graphs, tmp_path):
    """On the CPU plan the block's two Permutes are views (the LayerNorm reads its input with the channels
    innermost, the dense layers' output is that memory again): no Permute, no Reorder runs but the network
    input's (a numpy array) and the output's."""
    from device_daemons.cpu.plan import ExecutionPlan
    from ir import read_ir
    from tests.tf.tf_helpers import convert_model, nchw, nhwc, rel_err
    net = read_ir(convert_model(tf_graphs.path("convnext_block"), tmp_path, "convnext_block", batch=1))
    arrays = tf_graphs.arrays("convnext_block")
    plan = ExecutionPlan(net, backend="onednn", precision="f32")
    perf = []
    out = plan.infer({net.inputs()[0].name: nchw(arrays["in1/x"])}, perf)
    ran = [(row.type, row.status) for row in perf if row.type in ("Permute", "Reorder") and row.status != "not_run"]
    assert all(t == "Reorder" for t, _ in ran) and len(ran) <= 2, ran
    assert "LayerNorm" in [row.type for row in perf if row.backend == "onednn"]
    assert rel_err(nhwc(next(iter(out.values()))), arrays["out1/0"]) < 1e-5


def test_attention_runs_on_views_with_its_scale_fused(tf_graphs, tmp_path):
    """Keras' attention (heads split by a Reshape, Einsum's transposes): the Reshapes around the softmax
    cancel (it normalizes the last axis of the MatMul's own output), the scale is the MatMul's post-op, and the
    head transposes are views the MatMuls read as they are: no Reorder runs but at the network's edges."""
    from device_daemons.cpu.plan import ExecutionPlan
    from ir import read_ir
    from tests.tf.tf_helpers import convert_model, nchw
    net = read_ir(convert_model(tf_graphs.path("attention_heads"), tmp_path, "attention_heads", batch=1))
    matmuls = {layer.id for layer in net.layers if layer.type == "MatMul"}
    scales = [layer for layer in net.layers if layer.type == "ScaleShift"]
    assert len(scales) == 1 and [e.from_layer for e in net.edges if e.to_layer == scales[0].id][0] in matmuls
    plan = ExecutionPlan(net, backend="onednn", precision="f32")
    perf = []
    plan.infer({net.inputs()[0].name: nchw(tf_graphs.arrays("attention_heads")["in1/x"])}, perf)
    rows = {row.name: row for row in perf}
    assert rows[scales[0].name].status == "fused"  # (the MatMul's post-op)
    inner = [row for row in perf if row.type == "Reorder" and row.status != "not_run"
             and not any(edge in row.note for edge in ("input", "output", "numpy"))]
    assert not inner, [(row.name, row.note) for row in inner]


def test_infer_without_input_gives_an_embedding_valid_ids(tf_graphs, tmp_path):
    """`mo-core infer` with no input: the ids a Gather reads are random integers in its table's range (random
    normal values would fail the request as indices), and a wrong id fails with the layer and the index named."""
    from tests.support import run_cli
    from tests.tf.tf_helpers import convert_model
    xml = convert_model(tf_graphs.path("embedding_lookup"), tmp_path, "embedding_lookup", batch=1)
    code, out, err = run_cli("infer", "-m", xml)
    assert code == 0 and "random integers in its range" in out, out + err
    bad = tmp_path / "ids.npy"
    np.save(bad, np.full((1, 7), 40, np.int32))
    code, out, err = run_cli("infer", "-m", xml, "-i", str(bad))
    assert code == 1 and "index 40 is not an integer in [0, 40)" in out + err and "Traceback" not in out + err
