"""What TensorFlow may execute (issue 21, F1-F3): hostile models built by real
TensorFlow (hostile_graphs.py) are refused before anything runs - an [ ERROR ]
naming the op and its node at conversion, a load error on the daemon - and no
canary file is ever read or written. The allow-list itself: core/services/tf_ops.py."""
from __future__ import annotations

import os

import numpy as np
import pytest

from tests.convert.test_errors import assert_clean_failure
from tests.support import run_cli
from tests.sandbox.conftest import CANARY_TEXT, embedding_ir, plain_reference

pytestmark = pytest.mark.timeout(300)


def convert(tmp_path, *args):
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("convert", "--output_dir", str(out), *args, timeout=240)
    return code, stdout, stderr, out


# ------------------------------------------------------------------ F1: conversion
@pytest.mark.parametrize("option", [["--offload_unsupported_operations_to_tf"],
                                    ["--tensorflow_operation_patterns", "ReadFile,DecodeRaw"]])
def test_offloading_a_file_read_is_an_error(canaries, tmp_path, option):
    code, out, err, outdir = convert(tmp_path, "--input_model", canaries.path("read_file"), *option)
    assert_clean_failure(code, out, err, outdir, "op 'ReadFile' (node 'read')", "pure computations")
    assert CANARY_TEXT not in out + err


def test_a_graph_that_keeps_state_between_runs_is_not_offloaded(canaries, tmp_path):
    """Mutating a table or a variable is freezing's business only: an offloaded graph runs again
    and again in the shared TF worker and must hold nothing after a run."""
    code, out, err, outdir = convert(tmp_path, "--input_model", canaries.path("growing_table"),
                                     "--tensorflow_subgraph_patterns", ".*")
    assert_clean_failure(code, out, err, outdir, "op 'MutableHashTableV2'", "pure computations")


def test_a_fifo_path_does_not_block_the_conversion(canaries, tmp_path):
    fifo = canaries.canary("fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    code, out, err, outdir = convert(tmp_path, "--input_model", canaries.path("read_fifo"),
                                     "--offload_unsupported_operations_to_tf")
    assert_clean_failure(code, out, err, outdir, "op 'ReadFile'")


def test_a_function_that_writes_is_refused(canaries, tmp_path):
    code, out, err, outdir = convert(tmp_path, "--input_model", canaries.path("write_in_function"),
                                     "--offload_unsupported_operations_to_tf")
    assert_clean_failure(code, out, err, outdir, "op 'WriteFile'", "in function '")


def test_validate_refuses_what_the_framework_side_would_run(canaries, tmp_path):
    """--output y leaves the WriteFile out of the IR; the framework side of --validate
    would run it (a control input of y): the worker refuses the graph."""
    code, out, err, _ = convert(tmp_path, "--input_model", canaries.path("validate_control_write"), "--output", "y",
                                "--validate")
    assert code == 1, out + err
    assert "op 'WriteFile' (node 'write')" in err and "Traceback" not in out + err, err


@pytest.mark.parametrize("case,args,needle", [
    ("meta_restore_write", ("--input_meta_graph", "meta_graph", "--input_checkpoint", "checkpoint"), "restore op"),
    ("variable_control_write", ("--input_model", "model", "--input_checkpoint", "checkpoint", "--output", "y"),
     "op 'WriteFile' (node 'write')"),
    ("tf1_saved_model_main_op", ("--saved_model_dir", "saved_model_dir"), "init op"),
])
def test_freezing_refuses_what_would_write(canaries, tmp_path, case, args, needle):
    argv = [a if not a.startswith(("meta", "model", "check", "saved")) else canaries.path(case, a) for a in args]
    code, out, err, outdir = convert(tmp_path, *argv, "-b", "1")
    assert_clean_failure(code, out, err, outdir, "op 'WriteFile'", needle)


# ------------------------------------------------------------------ F2, F3: the daemon
@pytest.mark.parametrize("case,op", [("sampler", "FixedUnigramCandidateSampler"), ("decode_proto", "DecodeProtoV2"),
                                     ("abort", "Abort"), ("recursive_function", "StatefulPartitionedCall")])
def test_the_daemon_refuses_what_an_ir_must_not_run(canaries, ie, tmp_path, case, op):
    """An IR embedding a sampler whose vocab_file, or a proto decoder whose
    descriptor_source, names a file, an Abort, a function calling itself: a load
    error naming the op; the daemon then serves the next client correctly."""
    from device_daemons.client import InferenceError
    xml = embedding_ir(tmp_path, canaries.path(case), case)
    with pytest.raises(InferenceError) as err:
        ie.load_network(ie.read_network(model=xml), "CPU")
    assert "op '{}'".format(op) in str(err.value), str(err.value)
    if case == "recursive_function":
        assert "calls itself" in str(err.value)
    assert CANARY_TEXT not in str(err.value)
    plain = ie.load_network(ie.read_network(model=embedding_ir(tmp_path, canaries.path("plain"), "plain")), "CPU")
    try:
        x = np.linspace(-2, 2, 4, dtype=np.float32).reshape(1, 4)
        np.testing.assert_allclose(plain.infer({"x": x})["call"], plain_reference(x), rtol=1e-5, atol=1e-6)
    finally:
        plain.close()
