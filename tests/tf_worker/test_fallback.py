"""The shape-inference fallbacks: TensorFlow (the TF worker) computes the shapes of
nodes the converter has no shape function for, in one round trip; shapes that
depend on the data come from the user's sample input (--fallback_input) in both
the TensorFlow and the Caffe worker, and the log says which shapes came from a
framework and from what input. Real TensorFlow, real pycaffe."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from core.errors import Error
from ir import read_ir
from tests.support import REPO, assert_clean_failure, convert_api, make_caffemodel
from tests.tf.test_tf_worker import python_without_tensorflow
from tests.tf.tf_helpers import compare_with_tf

HERE = os.path.dirname(os.path.abspath(__file__))
ERF_NO_INFER = os.path.join(HERE, "erf_noinfer")
ERF_KERNEL = os.path.join(REPO, "tests", "tf", "erf_ext", "erf_kernel.py")
CAFFE = os.path.join(HERE, "caffe_data")


def messages(caplog, needle) -> list[str]:
    return [r.getMessage() for r in caplog.records if needle in r.getMessage()]


def test_an_extension_op_without_infer_gets_its_shapes_from_tensorflow(ie, offload_graphs, tmp_path, caplog):
    ie.add_extension(ERF_KERNEL, "CPU")
    with caplog.at_level(logging.INFO, logger="mo_core"):
        compare_with_tf(ie, offload_graphs, "erf_conv_erf", tmp_path, tol=1e-5, extensions=ERF_NO_INFER)
    layers = [layer for layer in read_ir(os.path.join(tmp_path, "erf_conv_erf.xml")).layers if layer.type == "Erf"]
    assert [(layer.inputs[0].dims, layer.outputs[0].dims) for layer in layers] == [((1, 3, 6, 6), (1, 3, 6, 6))] * 2
    # both Erf nodes (the second one behind a convolution) in one round trip, and the log says so
    (asked,) = messages(caplog, "come from TensorFlow's shape inference")
    assert "'Erf' (Erf)" in asked and "'Erf_1' (Erf)" in asked


def test_shapes_that_depend_on_the_data_come_from_the_sample_input(ie, offload_graphs, tmp_path, caplog):
    arrays = offload_graphs.arrays("where_count")
    sample = str(tmp_path / "x.npy")
    np.save(sample, arrays["in1/x"])
    with caplog.at_level(logging.INFO, logger="mo_core"):
        compare_with_tf(ie, offload_graphs, "where_count", tmp_path, tol=1e-5,
                        offload_unsupported_operations_to_tf=True, fallback_input=sample)
    rows = int((arrays["in1/x"] > 0).sum())
    where = read_ir(os.path.join(tmp_path, "where_count.xml")).layer_by_name("Where")
    assert where.outputs[0].dims == (rows, 2)
    (said,) = messages(caplog, "'Where' (TFCustomSubgraphCall) depend on the input data")
    assert "x from {}".format(sample) in said and "noise" not in said


def test_without_a_sample_input_the_log_says_it_was_noise(offload_graphs, caplog):
    with caplog.at_level(logging.INFO, logger="mo_core"):
        network = convert_api(input_model=offload_graphs.path("where_count"), batch=1,
                              offload_unsupported_operations_to_tf=True)
    (said,) = messages(caplog, "depend on the input data")
    assert "seeded noise for x" in said and "--fallback_input" in said
    rows = network.layer_by_name("Where").outputs[0].dims[0]
    noise = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    assert rows == int((noise > 0).sum())  # the worker's seeded noise (seed 0), not some other shape


@pytest.mark.parametrize("make, needle", [
    (lambda d: np.save(d / "s.npy", np.zeros((1, 7), np.float32)), "has the shape [1, 7], but the input's shape is "
                                                                   "[1, 16]"),
    (lambda d: np.savez(d / "s.npz", nope=np.zeros((1, 16), np.float32)), "no input of that name"),
    (lambda d: (d / "s.npy").write_text("not numpy"), "is not a numpy .npy/.npz file"),
])
def test_fallback_input_mistakes(offload_graphs, tmp_path, make, needle):
    make(tmp_path)
    sample = next(str(p) for p in tmp_path.iterdir() if p.name.startswith("s."))
    with pytest.raises(Error, match=None) as info:
        convert_api(input_model=offload_graphs.path("where_count"), batch=1,
                    offload_unsupported_operations_to_tf=True, fallback_input=sample)
    assert needle in str(info.value)


def test_a_tf_worker_without_tensorflow_is_an_error_naming_the_nodes(offload_graphs, tmp_path):
    from tests.tf.test_tf_worker import run_convert
    python = python_without_tensorflow(tmp_path / "venv")
    res = run_convert(tmp_path, "--input_model", offload_graphs.path("unsupported_chain"),
                      "--offload_unsupported_operations_to_tf", env={"MO_CORE_TF_PYTHON": python})
    assert_clean_failure(*res, tmp_path / "out", "'mid/bessel_i0e/BesselI0e'", "'head/Cumprod'", "needs TensorFlow",
                         "pip install tensorflow-cpu", "#41")


# --- Caffe ----------------------------------------------------------------------------
@pytest.fixture
def positives_model(tmp_path, monkeypatch):
    """The model's caffemodel; its Python layer importable here and in the Caffe worker."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([CAFFE, REPO]))
    monkeypatch.syspath_prepend(CAFFE)
    weights = str(tmp_path / "positives.caffemodel")
    make_caffemodel(os.path.join(CAFFE, "positives.prototxt"), weights, scale=0.5)
    return weights


def caffe_positives(weights, x) -> int:
    from tests.support import caffe_outputs
    out = caffe_outputs(os.path.join(CAFFE, "positives.prototxt"), weights, {"data": x})
    return out.blobs["positives"].data.shape[0]


def test_caffe_fallback_runs_caffe_on_the_sample_input(positives_model, tmp_path, caplog):
    x = np.random.default_rng(5).standard_normal((1, 2, 4, 4)).astype(np.float32)
    sample = str(tmp_path / "x.npy")
    np.save(sample, x)
    options = dict(input_model=positives_model, input_proto=os.path.join(CAFFE, "positives.prototxt"),
                   custom_layers_mapping=os.path.join(CAFFE, "mapping.xml"), use_caffe_fallback=True)
    with caplog.at_level(logging.INFO, logger="mo_core"):
        network = convert_api(fallback_input=sample, **options)
    assert network.layer_by_name("positives").outputs[0].dims == (caffe_positives(positives_model, x), 1)
    (said,) = messages(caplog, "come from Caffe")
    assert "'positives' (Python)" in said and "data from {}".format(sample) in said
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mo_core"):
        network = convert_api(**options)
    (said,) = messages(caplog, "come from Caffe")
    assert "seeded noise for data" in said
