"""The low items of issue 21: hostile inputs that ended in tracebacks, hung or
converted silently now give a clean [ ERROR ] (exit 1, no traceback, no files) or
the warning Caffe models already got. Graphs built by real TensorFlow
(hostile_graphs.py); the GPU work size: test_gpu_daemon_hostile.py."""
from __future__ import annotations

import pytest

from tests.convert.test_errors import assert_clean_failure
from tests.sandbox.test_allow_list import convert
from tests.support import REPO

pytestmark = pytest.mark.timeout(120)
DEMO = ("--input_model", REPO + "/models/demo/demo_net.caffemodel", "--input_proto",
        REPO + "/models/demo/demo_net.prototxt")


def test_a_pbtxt_nested_3000_deep(tmp_path):
    depth = 3000
    text = ('node { name: "a" op: "Placeholder" attr { key: "k" value { func { ' +
            'attr { key: "k" value { func { ' * depth + 'name: "x"' + ' } } }' * depth + ' } } } }')
    model = tmp_path / "deep.pbtxt"
    model.write_text(text)
    code, out, err, outdir = convert(tmp_path, "--input_model", str(model), "--input_model_is_text")
    assert_clean_failure(code, out, err, outdir, "nested too deeply", "#42")


def test_a_5000_digit_integer_in_a_replacement_config(tmp_path):
    """(custom_attributes {"type": "Convolution"}: tests/replacement/test_config_files.py)"""
    config = tmp_path / "config.json"
    config.write_text('[{"id": "x", "match_kind": "general", "custom_attributes": {"n": ' + "9" * 5000 + '}}]')
    code, out, err, outdir = convert(tmp_path, *DEMO, "--tensorflow_use_custom_operations_config", str(config))
    assert_clean_failure(code, out, err, outdir, "more than 4300 digits", "#69")


def test_a_catastrophic_pattern_matches_in_linear_time(hostile, tmp_path):
    """(a+)+$ against a 49-character node name: minutes with a backtracking matcher; RE2
    answers at once (it does not match: the name ends in b), and the run goes on to its
    result - here the warning that the pattern matches nothing."""
    code, out, err, _ = convert(tmp_path, "--input_model", hostile.path("long_name"),
                                "--tensorflow_subgraph_patterns", "(a+)+$")
    assert code == 0 and "'(a+)+$' matches no node" in out + err, out + err
    code, out, err, outdir = convert(tmp_path / "backreference", "--input_model", hostile.path("long_name"),
                                     "--tensorflow_subgraph_patterns", "(a)\\1")
    assert_clean_failure(code, out, err, outdir, "not a regular expression RE2 accepts")


def test_nan_and_inf_in_tensorflow_weights_are_named(hostile, tmp_path):
    code, out, err, _ = convert(tmp_path, "--input_model", hostile.path("nan_weights"))
    assert code == 0 and "Node 'w' (Const): its value has 1 NaN and 1 infinite values of 4" in out + err, out + err


@pytest.mark.parametrize("case,needle", [
    ("conv2d_int64", "Node 'y' (Conv2D): its attribute 'T' is int64, which Conv2D does not take"),
    ("reshape_float_shape", "Node 'y' (Reshape): its attribute 'Tshape' is float32"),
    ("relu_of_string", "Node 'y' (Relu): its attribute 'T' is string"),
])
def test_graphs_tensorflow_refuses_are_refused(hostile, tmp_path, case, needle):
    code, out, err, outdir = convert(tmp_path, "--input_model", hostile.path(case), "-b", "1")
    assert_clean_failure(code, out, err, outdir, needle, "TensorFlow itself refuses this graph")
