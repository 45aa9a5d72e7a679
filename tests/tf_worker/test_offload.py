"""Offloading sub-graphs to TensorFlow, the reference guide's three options, on graphs
built by real TensorFlow (offload_graphs.py): the converted IRs hold
TFCustomSubgraphCall layers that the CPU daemon runs through its TF worker, and
equal TensorFlow within 1e-5 (1e-4 for the Keras ResNet50 with a residual block
offloaded). The converter and the daemon never import TensorFlow."""
from __future__ import annotations

import base64
import logging
import os
import shutil

import numpy as np
import pytest

from core.errors import Error
from core.front.tf.loader import tf_pb2
from ir import read_ir
from tests.support import assert_clean_failure, convert_api, run_cli
from tests.tf.tf_helpers import compare_with_tf, convert_model, run_on_daemon

OFFLOAD = "TFCustomSubgraphCall"


def calls(xml: str) -> list:
    return [layer for layer in read_ir(xml).layers if layer.type == OFFLOAD]


def graph_def_of(layer):
    graph = tf_pb2().GraphDef()
    graph.ParseFromString(base64.b64decode(layer.data["protobuf"]))
    return graph


# (graph, options, TFCustomSubgraphCall layers expected)
CASES = [
    ("unsupported_chain", {"offload_unsupported_operations_to_tf": True}, 2),
    ("unsupported_chain", {"tensorflow_operation_patterns": "Cumprod,BesselI0e"}, 2),
    ("unsupported_chain", {"tensorflow_subgraph_patterns": "mid/.*,head/.*"}, 2),
    ("unsupported_chain", {"tensorflow_subgraph_patterns": "(mid|head)/.*"}, 1),
    ("igamma_two_inputs", {"offload_unsupported_operations_to_tf": True}, 1),
    ("igamma_two_inputs", {"tensorflow_operation_patterns": "Igamma"}, 1),
    ("igamma_two_inputs", {"tensorflow_subgraph_patterns": "Igamma|mul_1"}, 1),  # with the constant it multiplies by
    ("einsum", {"offload_unsupported_operations_to_tf": True}, 1),
    ("einsum", {"tensorflow_operation_patterns": "Einsum"}, 1),
    ("einsum", {"tensorflow_subgraph_patterns": "einsum/.*,Relu"}, 2),  # two patterns: two layers, add between
    ("composite_head", {"tensorflow_subgraph_patterns": "head/.*"}, 1),
    ("composite_head", {"tensorflow_operation_patterns": "Softplus|BesselI0e|BesselI1e"}, 1),
    # BesselI0e, BesselI1e: not connected (Softplus: ours)
    ("composite_head", {"offload_unsupported_operations_to_tf": True}, 2),
    ("flatten_dense", {"offload_unsupported_operations_to_tf": True}, 1),
    ("gather_channels", {"offload_unsupported_operations_to_tf": True}, 0),  # Crops and a Concat: ours
    ("embedding_ids", {"offload_unsupported_operations_to_tf": True}, 0),  # Floor, Cast, Gather: all ours
    ("masked_rows", {"offload_unsupported_operations_to_tf": True}, 1),  # Any (the comparisons are ours)
    ("bool_through_native", {"offload_unsupported_operations_to_tf": True}, 2),  # ApproximateEqual, Any (Log is ours)
    ("while_loop", {"offload_unsupported_operations_to_tf": True}, 1),
    ("while_loop", {"tensorflow_operation_patterns": "Less"}, 1),  # one node of the loop: the whole loop goes
    ("long_loop", {"offload_unsupported_operations_to_tf": True}, 1),  # 1500 iterations: not unrolled
    ("rnn_scan", {"offload_unsupported_operations_to_tf": True}, 0),  # unrolled: nothing left to offload
    ("rnn_scan", {"tensorflow_operation_patterns": "TensorList.*"}, 1),  # the pattern keeps the loop whole
]


@pytest.mark.parametrize("case, options, count", CASES,
                         ids=["{}-{}".format(c, "-".join(o)) + str(i) for i, (c, o, _) in enumerate(CASES)])
def test_offloaded_graph_runs_on_the_cpu_daemon_equal_to_tensorflow(ie, offload_graphs, tmp_path, case, options,
                                                                     count):
    compare_with_tf(ie, offload_graphs, case, tmp_path, tol=1e-5, **options)
    layers = calls(os.path.join(tmp_path, case + ".xml"))
    assert len(layers) == count, [layer.name for layer in layers]
    for layer in layers:
        assert layer.data["input_nodes_names"].count(",") + 1 == len(layer.inputs)
        assert layer.data["output_tensors_names"].count(",") + 1 == len(layer.outputs)


def test_the_unsupported_ops_are_the_only_ones_offloaded(offload_graphs):
    network = convert_api(input_model=offload_graphs.path("unsupported_chain"), batch=1,
                          offload_unsupported_operations_to_tf=True)
    layers = [layer for layer in network.layers if layer.type == OFFLOAD]
    assert [layer.name for layer in layers] == ["mid/bessel_i0e/BesselI0e", "head/Cumprod"]
    for layer in layers:  # the op, its constant inputs (Cumprod's axis), Placeholder, the layout Transposes
        ops = sorted(n.op for n in graph_def_of(layer).node)
        assert ops.count("Placeholder") == 1 and ops.count("Transpose") == 2
        assert {"BesselI0e", "Cumprod"} & set(ops)
    assert "Convolution" in [layer.type for layer in network.layers]


def test_a_convolution_offloaded_with_its_weights(ie, offload_graphs, tmp_path):
    """The reference: offloading a convolution works when its weights go with it (as TensorFlow has them)."""
    compare_with_tf(ie, offload_graphs, "conv_weights", tmp_path, tol=1e-5, tensorflow_operation_patterns="Conv2D")
    (layer,) = calls(os.path.join(tmp_path, "conv_weights.xml"))
    graph = graph_def_of(layer)
    weights = [n for n in graph.node if n.op == "Const" and len(n.attr["value"].tensor.tensor_shape.dim) == 4]
    assert [[d.size for d in n.attr["value"].tensor.tensor_shape.dim] for n in weights] == [[3, 3, 3, 8]]  # HWIO
    assert len(layer.inputs) == 1 and not layer.blobs


def test_batch_2_and_keeping_nhwc(ie, offload_graphs, tmp_path):
    compare_with_tf(ie, offload_graphs, "conv_weights", tmp_path, batch=2, tol=1e-5,
                    tensorflow_operation_patterns="Conv2D")
    compare_with_tf(ie, offload_graphs, "unsupported_chain", tmp_path, tol=1e-5, nhwc_io=True,
                    offload_unsupported_operations_to_tf=True)


def test_fp16_ir_with_an_offloaded_sub_graph(ie, offload_graphs, tmp_path):
    compare_with_tf(ie, offload_graphs, "composite_head", tmp_path, tol=1e-2, data_type="FP16",
                    tensorflow_subgraph_patterns="head/.*")


def test_a_path_between_the_matches_splits_the_call(ie, offload_graphs, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="mo_core"):
        compare_with_tf(ie, offload_graphs, "erf_conv_erf", tmp_path, tol=1e-5, tensorflow_operation_patterns="Erf")
    assert len(calls(os.path.join(tmp_path, "erf_conv_erf.xml"))) == 2
    assert any("cannot be one TFCustomSubgraphCall" in r.getMessage() and "'Conv2D'" in r.getMessage()
               for r in caplog.records)


def test_resnet50_with_a_residual_block_offloaded_equals_tensorflow(ie, keras_apps, tmp_path):
    compare_with_tf(ie, keras_apps, "resnet50", tmp_path, tol=1e-4,
                    tensorflow_subgraph_patterns="resnet50_1/conv2_block1_.*")
    (layer,) = calls(os.path.join(tmp_path, "resnet50.xml"))
    assert [p.dims for p in layer.inputs] == [(1, 64, 56, 56)] and [p.dims for p in layer.outputs] == [
        (1, 256, 56, 56)]
    ops = {n.op for n in graph_def_of(layer).node}
    assert {"Conv2D", "AddV2", "Relu"} <= ops


def test_the_ir_is_self_contained(ie, offload_graphs, tmp_path):
    """The sub-graph lives in the IR: the model file can go."""
    model = shutil.copy(offload_graphs.path("composite_head"), tmp_path / "model.pb")
    xml = convert_model(str(model), tmp_path / "ir", "model", batch=1, tensorflow_subgraph_patterns="head/.*")
    os.remove(model)
    arrays = offload_graphs.arrays("composite_head")
    _, out = run_on_daemon(ie, xml, {"x": arrays["in1/x"]})
    np.testing.assert_allclose(next(iter(out.values())), arrays["out1/0"], rtol=1e-5, atol=1e-5)
    text = open(xml).read()
    assert str(model) not in text.split("<meta_data>")[0]


def test_ir_v11_cannot_express_the_offloaded_layer(offload_graphs, tmp_path):
    code, out, err = run_cli("convert", "--input_model", offload_graphs.path("einsum"), "-b", "1", "--output_dir",
                             str(tmp_path / "out"), "--offload_unsupported_operations_to_tf", "--ir_version", "11",
                             timeout=600)
    assert_clean_failure(code, out, err, tmp_path / "out", "IR version 11 cannot express",
                         "'einsum/Einsum' (TFCustomSubgraphCall: a TensorFlow sub-graph that TensorFlow runs")


def test_option_mistakes(offload_graphs, tmp_path, caplog):
    model = offload_graphs.path("einsum")
    with pytest.raises(Error, match="'Ein\\(sum' is not a regular expression"):
        convert_api(input_model=model, batch=1, tensorflow_operation_patterns="Ein(sum")
    with pytest.raises(Error, match="(?s)Einsum.*offload them to TensorFlow"):  # nothing offloaded: still unsupported
        with caplog.at_level(logging.WARNING, logger="mo_core"):
            convert_api(input_model=model, batch=1, tensorflow_subgraph_patterns="nothing/.*")
    assert any("'nothing/.*' matches no node" in r.getMessage() for r in caplog.records)
    code, out, err = run_cli("convert", "--input_model", model, "-b", "1", "--output_dir", str(tmp_path / "out"),
                             "--tensorflow_operation_patterns", ",")
    assert_clean_failure(code, out, err, tmp_path / "out", "--tensorflow_operation_patterns is empty")


def test_cli_offloads_and_infers(ie, offload_graphs, tmp_path):  # (ie: the daemon of a private runtime dir)
    model = offload_graphs.path("igamma_two_inputs")
    code, out, err = run_cli("convert", "--input_model", model, "-b", "1", "--output_dir", str(tmp_path),
                             "--offload_unsupported_operations_to_tf", timeout=600)
    assert code == 0, err
    xml = os.path.join(tmp_path, "igamma_two_inputs.xml")
    assert [layer.name for layer in calls(xml)] == ["Igamma"]
    arrays = offload_graphs.arrays("igamma_two_inputs")
    np.savez(tmp_path / "in.npz", x=arrays["in1/x"].transpose(0, 3, 1, 2), y=arrays["in1/y"].transpose(0, 3, 1, 2))
    code, out, err = run_cli("infer", "-m", xml, "-i", str(tmp_path / "in.npz"), "-d", "CPU", "-o",
                             str(tmp_path / "out.npz"), "-infer_precision", "f32", timeout=600)  # vs TF at 1e-5
    assert code == 0, err
    got = np.load(tmp_path / "out.npz")
    (key,) = got.files
    np.testing.assert_allclose(got[key].transpose(0, 2, 3, 1), arrays["out1/0"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case, why", [("while_loop", "its condition is no counter against a constant: it reads the "
                                                      "model's data"),
                                       ("long_loop", "it runs more than 1000 iterations")])
def test_a_loop_left_whole_says_why(offload_graphs, caplog, case, why):
    """A loop the converter cannot unroll (core/front/tf/loops/) is named with the reason, and without an
    offload option the unsupported-operations report lists its control flow."""
    with caplog.at_level(logging.WARNING, logger="mo_core"):
        with pytest.raises(Error, match="LoopCond"):
            convert_api(input_model=offload_graphs.path(case), batch=1)
    assert "The while loop 'while' is left as it is" in caplog.text and why in caplog.text, caplog.text
