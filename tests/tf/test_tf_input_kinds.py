"""Inputs that are not plain 4-D images, as the reference converted them: --input
naming a node no model data flows into (a PlaceholderWithDefault becomes an input of
its name), -b and --scale with a scalar input, and --mean_values / --scale_values /
--reverse_input_channels on inputs kept NHWC (--disable_nhwc_to_nchw) or named as
TensorFlow names tensors (x:0) or as --input named them (relu:0, 0:out), and
--freeze_placeholder_with_value. Checked on the CPU daemon against TensorFlow's
outputs (made in a subprocess) or the graphs' own arithmetic."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from ir import read_ir
from tests.support import assert_clean_failure, run_cli
from tests.tf.tf_helpers import convert_model, rel_err, run_on_daemon

HERE = os.path.dirname(os.path.abspath(__file__))
X = np.array([[0.5, -1.0, 2.0, 3.0]], np.float32)
K = np.array(3.0, np.float32)


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    out = tmp_path_factory.mktemp("input_kinds")
    subprocess.run([sys.executable, os.path.join(HERE, "input_kinds_graphs.py"), str(out)], check=True,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=300)
    return out


def infer(ie, xml, feeds, nhwc_io=True):
    """The network's one output (its name is the layer that computes it: an Identity goes)."""
    (out,) = run_on_daemon(ie, xml, feeds, nhwc_io=nhwc_io)[1].values()
    return out


def test_input_names_a_placeholder_with_default(ie, graphs, tmp_path):
    xml = convert_model(graphs / "scalars.pb", tmp_path, input="x,k,t")
    assert {layer.name: list(layer.outputs[0].dims) for layer in read_ir(xml).inputs()} == \
        {"x": [1, 4], "k": [], "t": []}
    out = infer(ie, xml, {"x": X, "k": K, "t": np.array(5.0, np.float32)})
    np.testing.assert_allclose(out, X * K + 5.0, rtol=1e-6)


def test_batch_and_scale_leave_a_scalar_input_a_scalar(ie, graphs, tmp_path):
    xml = convert_model(graphs / "scalars.pb", tmp_path / "b", batch=2)
    assert {layer.name: list(layer.outputs[0].dims) for layer in read_ir(xml).inputs()} == {"x": [2, 4], "k": []}
    x2 = np.concatenate([X, -X])
    np.testing.assert_allclose(infer(ie, xml, {"x": x2, "k": K}), x2 * K + 2.0, rtol=1e-6)
    xml = convert_model(graphs / "scalars.pb", tmp_path / "s", scale=2.0)  # every input, the scalar too
    np.testing.assert_allclose(infer(ie, xml, {"x": X, "k": K}), (X / 2) * (K / 2) + 2.0, rtol=1e-6)


@pytest.mark.parametrize("nhwc", [False, True], ids=["nchw", "nhwc_kept"])
def test_preprocessing_of_nhwc_inputs_by_tensor_names(ie, graphs, tmp_path, nhwc):
    """Means and scales on the channels of a kept-NHWC input (its last axis), the inputs
    named as TensorFlow names their tensors or as they are."""
    ref = np.load(graphs / "reference.npz")
    xml = convert_model(graphs / "two_inputs.pb", tmp_path, mean_values="x:0[1,2,3],y[4,5,6]",
                        scale_values="x:0[2,3,4]", reverse_input_channels=True, disable_nhwc_to_nchw=nhwc)
    out = infer(ie, xml, {"x": ref["x"], "y": ref["y"]}, nhwc_io=nhwc)
    assert rel_err(out, ref["out"]) < 1e-5


@pytest.mark.parametrize("cut, name", [("relu:0", "relu/output_port_0"), ("0:out", "out/placeholder_port_0")])
def test_mean_values_name_an_input_as_input_named_it(ie, graphs, tmp_path, cut, name):
    """--input relu:0 (or 0:out) --mean_values relu:0[...]: the reference's spellings of
    a cut input; after the cut the graph is a mean over H and W, so the output is the
    input's mean less the mean values."""
    xml = convert_model(graphs / "two_inputs.pb", tmp_path, input=cut, mean_values=f"{cut}[1,2,3,4]")
    assert [layer.name for layer in read_ir(xml).inputs()] == [name]
    r = np.random.default_rng(2).uniform(0, 4, (1, 8, 8, 4)).astype(np.float32)
    out = infer(ie, xml, {name: r}, nhwc_io=False)
    np.testing.assert_allclose(out, r.mean(axis=(1, 2)) - [1, 2, 3, 4], rtol=1e-5, atol=1e-6)


def test_freeze_placeholder_with_value(ie, graphs, tmp_path):
    """Placeholders (and a PlaceholderWithDefault, whose default then goes) frozen to
    values: no longer inputs, the values computed with; the one output stays the one."""
    xml = convert_model(graphs / "scalars.pb", tmp_path, freeze_placeholder_with_value="k->2, t->[1]")
    assert [layer.name for layer in read_ir(xml).inputs()] == ["x"]
    np.testing.assert_allclose(infer(ie, xml, {"x": X}), X * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("entries", ["x[1,4],k->2,t[1]->[1]", "x[1 4]{f32},k{i32}->2,t->[1]", "x,k,t"])
def test_mos_input_syntax_freezes_and_shapes(ie, graphs, tmp_path, entries):
    """mo's --input NAME[SHAPE]{TYPE}->VALUE: a ->VALUE freezes the input (as --freeze_placeholder_with_value),
    a [SHAPE] is its shape; an entry that the other option freezes is no input either."""
    frozen = None if "->" in entries else "k->2,t->[1]"
    xml = convert_model(graphs / "scalars.pb", tmp_path, input=entries, freeze_placeholder_with_value=frozen)
    assert [layer.name for layer in read_ir(xml).inputs()] == ["x"]
    np.testing.assert_allclose(infer(ie, xml, {"x": X}), X * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("entries, needles", [
    ("x[1,4]{u8}", ["the type {u8} of x", "f32"]),
    ("x[1,4", ["cannot be parsed"]),
    ("x[1,?]", ["cannot be parsed", "not a list of integers"]),
])
def test_mos_input_syntax_mistakes(graphs, tmp_path, entries, needles):
    res = run_cli("convert", "--input_model", str(graphs / "scalars.pb"), "--output_dir", str(tmp_path / "out"),
                  "--input", entries, "--freeze_placeholder_with_value", "k->2,t->[1]")
    assert_clean_failure(*res, tmp_path / "out", *needles)


def test_a_frozen_training_switch_resolves_tf1_control_flow(ie, graphs, tmp_path):
    """is_training->False on a TF1 export: the Switch/Merge pairs of tf.cond and of
    batch_normalization(training=...) have a constant predicate; the training branches go
    (the batch statistics with them), the result is TensorFlow's with is_training False."""
    ref = np.load(graphs / "is_training.npz")
    code, out, err = run_cli("convert", "--input_model", str(graphs / "is_training.pb"), "--output_dir", str(tmp_path),
                             "--freeze_placeholder_with_value", "is_training->False")
    assert code == 0, out + err
    net = read_ir(str(tmp_path / "is_training.xml"))
    assert [layer.name for layer in net.inputs()] == ["x"]
    assert not {"Switch", "Merge", "Mean"} & {layer.type for layer in net.layers}
    ours = infer(ie, str(tmp_path / "is_training.xml"), {"x": ref["x"]}, nhwc_io=False)
    np.testing.assert_allclose(ours, ref["out"], rtol=1e-5, atol=1e-5)
    # conds inside conds (the inner predicate the outer Switch passes on) and on a LogicalNot of the switch:
    # all resolved, no pivot of theirs left behind as an output
    ref = np.load(graphs / "nested_cond.npz")
    xml = convert_model(graphs / "nested_cond.pb", tmp_path / "nested", freeze_placeholder_with_value="is_training->0")
    assert len(read_ir(xml).outputs()) == 1
    np.testing.assert_allclose(infer(ie, xml, {"x": ref["x"]}), ref["out"], rtol=1e-6)
    code, out, err = run_cli("convert", "--input_model", str(graphs / "is_training.pb"), "--output_dir",
                             str(tmp_path / "unfrozen"))
    assert code == 1 and "--freeze_placeholder_with_value \"is_training->False\"" in out + err, out + err


def test_a_frozen_training_switch_picks_the_branch_of_tf2s_cond(ie, graphs, tmp_path):
    """TF2's tf.cond is a StatelessIf with a function per branch: on a frozen predicate the taken branch is
    inlined (the other and the predicate gone), as mo converts it."""
    ref = np.load(graphs / "is_training_v2.npz")
    xml = convert_model(graphs / "is_training_v2.pb", tmp_path, freeze_placeholder_with_value="is_training->False")
    net = read_ir(xml)
    assert [layer.name for layer in net.inputs()] == ["x"] and len(net.outputs()) == 1
    assert {layer.type for layer in net.layers} == {"Input", "Convolution", "Activation", "ScaleShift"}
    np.testing.assert_allclose(infer(ie, xml, {"x": ref["x"]}, nhwc_io=False), ref["out"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("value, needles", [
    ("k->[1 2]", ["'k' has the shape []", "the value gives 2"]),
    ("nosuch->1", ["no placeholder 'nosuch'", "k, t, x"]),
    ("k->abc", ["the value abc for 'k'"]),
    ("k->", ["cannot be parsed", "name->value"]),
    ("k->1,k->2", ["freezes k twice"]),
])
def test_freeze_placeholder_mistakes(graphs, tmp_path, value, needles):
    res = run_cli("convert", "--input_model", str(graphs / "scalars.pb"), "--output_dir", str(tmp_path / "out"),
                  "--freeze_placeholder_with_value", value)
    assert_clean_failure(*res, tmp_path / "out", *needles)


def test_reverse_input_channels_with_no_three_channel_input_says_so(graphs, tmp_path):
    code, out, err = run_cli("convert", "--input_model", str(graphs / "two_inputs.pb"), "--input", "relu:0",
                             "--reverse_input_channels", "--output_dir", str(tmp_path))
    assert code == 0, err
    assert "[ WARNING ]  --reverse_input_channels reversed nothing" in out + err
    assert "relu/output_port_0 [1, 4, 8, 8]" in out + err


@pytest.mark.parametrize("model, args", [("scalars.pb", ["-b", "2"]), ("two_inputs.pb", ["-b", "3"]),
                                         ("two_inputs.pb", ["--input", "x,y", "--input_shape",
                                                            "[2,8,8,3],[2,8,8,3]"])])
def test_validate_at_another_batch_than_the_placeholders(graphs, tmp_path, model, args):
    """--validate feeds TensorFlow at the IR's shapes: the placeholders' fixed batch 1
    is set to the one -b / --input_shape gave (TensorFlow refused the feed before)."""
    code, out, err = run_cli("convert", "--input_model", str(graphs / model), *args, "--validate",
                             "--output_dir", str(tmp_path))
    assert code == 0, err
    assert "vs TensorFlow" in out and "OK" in out
