"""Models that need TensorFlow to be frozen: --saved_model_dir (a TF2 SavedModel, a
Keras 3 export), --input_meta_graph with its checkpoint, and a GraphDef with
variables plus --input_checkpoint. The TF worker process (fallback_workers/tf_worker)
freezes them with real TensorFlow; the core never imports it. The IRs run on the
CPU daemon and equal TensorFlow within 1e-4. Without TensorFlow in the worker's
interpreter (MO_CORE_TF_PYTHON: a venv made here that truly has no TensorFlow),
the error says how to install it."""
import glob
import logging
import os
import re
import subprocess
import sys

import pytest

from core.errors import Error
from ir import read_ir
from tests.convert.test_errors import assert_clean_failure
from tests.support import REPO, convert_api, run_cli
from benchmarks.built_models import Models, built
from tests.tf.tf_helpers import convert_model, rel_err, run_on_daemon

CASES = ("tf2_saved_model", "keras_export", "keras_unet3d", "keras_sequence", "tf1_meta_graph",
         "tf1_graph_and_checkpoint", "tf1_resource_meta_graph", "tf1_resource_graph_and_checkpoint")


@pytest.fixture(scope="module")
def saved_models() -> Models:
    return Models(built("saved_models"))


def options(models, case) -> dict:
    meta = models.meta(case)
    return {key: os.path.join(models.dir, meta[key]) for key in
            ("saved_model_dir", "input_meta_graph", "input_model", "input_checkpoint") if key in meta}


@pytest.mark.parametrize("case", CASES)
def test_frozen_by_the_worker_equals_tensorflow(ie, saved_models, tmp_path, case):
    paths = options(saved_models, case)
    xml = convert_model(paths.pop("input_model", None), tmp_path, case, batch=1, **paths)
    arrays = saved_models.arrays(case)
    feeds = {name: arrays["in1/" + name] for name in saved_models.meta(case)["inputs"]}
    _, out = run_on_daemon(ie, xml, feeds)
    assert len(out) == 1
    assert rel_err(next(iter(out.values())), arrays["out1/0"]) <= 1e-4
    assert read_ir(xml).meta["framework"] == "tf"
    if case == "keras_unet3d":  # the volume layers native (they were offloaded), the batch norm folded
        types = [layer.type for layer in read_ir(xml).layers]
        assert "TFCustomSubgraphCall" not in types and types.count("Deconvolution") == 1, types
        assert types.count("Convolution") == 3 and "Eltwise" not in types, types
        assert read_ir(xml).layers[0].outputs[0].dims == (1, 2, 4, 8, 8)  # NCDHW, as 4-D inputs are NCHW
    if case == "keras_sequence":  # the GRU's and the LSTM's loops unrolled: 9 steps each, nothing offloaded
        names = [layer.name for layer in read_ir(xml).layers]
        assert "TFCustomSubgraphCall" not in [layer.type for layer in read_ir(xml).layers]
        for loop in ("gru", "lstm"):
            steps = {int(m.group(1)) for n in names if f"/{loop}" in n and (m := re.search(r"/unrolled_(\d+)", n))}
            assert steps == set(range(9)), (loop, sorted(steps))


@pytest.mark.parametrize("case", ["tf1_recurrence", "tf1_recurrence_any_length"])
def test_tf1_recurrence_unrolled(ie, saved_models, tmp_path, case):
    """A TF1 graph's recurrence (TensorArrayV3; its trip count from the input's Shape, the batch unknown, the number
    of steps too in the second: --input_shape gives it) unrolled at batch 2; the loop's final state is the output its
    Exit node names, as in TensorFlow."""
    meta, arrays = saved_models.meta(case), saved_models.arrays(case)
    shape = {"batch": 2} if case == "tf1_recurrence" else {"input_shape": "[2,6,4]"}
    xml = convert_model(os.path.join(saved_models.dir, meta["input_model"]), tmp_path, case, **shape)
    _, out = run_on_daemon(ie, xml, {"x": arrays["in1/x"]})
    assert meta["outputs"][1] == "while/Exit_1" and sorted(out) == sorted(meta["outputs"])
    for i, name in enumerate(meta["outputs"]):
        assert rel_err(out[name], arrays[f"out1/{i}"]) <= 1e-5, name
    assert "TFCustomSubgraphCall" not in [layer.type for layer in read_ir(xml).layers]


def test_a_loop_over_steps_of_unknown_number_asks_for_the_shape(saved_models, caplog):
    meta = saved_models.meta("tf1_recurrence_any_length")
    with caplog.at_level(logging.WARNING, logger="mo_core"), pytest.raises(Error):
        convert_api(input_model=os.path.join(saved_models.dir, meta["input_model"]), batch=2)
    assert "a dimension the graph leaves unknown (give the input's shape with --input_shape)" in caplog.text


def test_ir_v11_names_the_output_by_the_signature(saved_models, tmp_path):
    """A SavedModel's output is named by its signature's key in IR v11 ("scores"), as OpenVINO's converters
    name it, besides the layer's name; the numbers are TensorFlow's on the OpenVINO runtime."""
    import openvino as ov
    paths = options(saved_models, "tf2_saved_model")
    code, out, err = run_cli("convert", "--saved_model_dir", paths["saved_model_dir"], "-b", "1", "--ir_version",
                             "11", "--output_dir", str(tmp_path), "--model_name", "m")
    assert code == 0, out + err
    compiled = ov.Core().compile_model(str(tmp_path / "m.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    (port,) = compiled.outputs
    assert {"scores", "scores:0"} <= port.get_names()
    arrays = saved_models.arrays("tf2_saved_model")
    result = compiled({0: arrays["in1/image"].transpose(0, 3, 1, 2)})[port]
    assert rel_err(result, arrays["out1/0"]) <= 1e-4


def run_convert(tmp_path, *args, env=None):
    proc = subprocess.run([sys.executable, "-m", "cli", "convert", "--output_dir", str(tmp_path / "out"), "-b", "1",
                           *args], capture_output=True, text=True, cwd=REPO, timeout=600,
                          env=dict(os.environ, PYTHONPATH=REPO, **(env or {})))
    return proc.returncode, proc.stdout, proc.stderr


def python_without_tensorflow(directory) -> str:
    """A venv whose python has what the worker needs (numpy, pyzmq, msgpack) and no TensorFlow."""
    import msgpack
    import numpy
    import zmq
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True)
    site = glob.glob(os.path.join(str(directory), "lib", "python*", "site-packages"))[0]
    for module in (numpy, zmq, msgpack):
        package = os.path.dirname(module.__file__)
        parent = os.path.dirname(package)
        for entry in os.listdir(parent):  # the package and its bundled libraries (numpy.libs, pyzmq.libs)
            if entry == os.path.basename(package) or entry.startswith(os.path.basename(package) + ".libs") or \
                    entry == "py" + os.path.basename(package) + ".libs":
                os.symlink(os.path.join(parent, entry), os.path.join(site, entry))
    python = os.path.join(str(directory), "bin", "python")
    check = subprocess.run([python, "-c", "import numpy, zmq, msgpack, importlib.util as u; "
                                          "raise SystemExit(u.find_spec('tensorflow') is not None)"])
    assert check.returncode == 0, "the venv without TensorFlow could not be made"
    return python


def test_without_tensorflow_the_error_says_how_to_install_it(saved_models, tmp_path):
    python = python_without_tensorflow(tmp_path / "venv")
    res = run_convert(tmp_path, "--saved_model_dir", options(saved_models, "tf2_saved_model")["saved_model_dir"],
                      env={"MO_CORE_TF_PYTHON": python})
    assert_clean_failure(*res, tmp_path / "out", "needs TensorFlow", "pip install tensorflow-cpu", python,
                         "MO_CORE_TF_PYTHON", "#41")


def test_a_missing_worker_python(saved_models, tmp_path):
    res = run_convert(tmp_path, "--saved_model_dir", options(saved_models, "tf2_saved_model")["saved_model_dir"],
                      env={"MO_CORE_TF_PYTHON": str(tmp_path / "no" / "python")})
    assert_clean_failure(*res, tmp_path / "out", "no/python", "does not exist")


def test_a_saved_models_graph_file_as_input_model(saved_models, tmp_path):
    directory = options(saved_models, "tf2_saved_model")["saved_model_dir"]
    res = run_convert(tmp_path, "--input_model", os.path.join(directory, "saved_model.pb"))
    assert_clean_failure(*res, tmp_path / "out", "graph file of a SavedModel", "--saved_model_dir " + directory)


def test_a_signature_chosen_by_name(ie, saved_models, tmp_path):
    """A SavedModel of two signatures and no serving_default: an error naming them and the option; the one named by
    --saved_model_signature converts and equals TensorFlow's; a name it lacks is an error listing its names."""
    directory = options(saved_models, "two_signatures")["saved_model_dir"]
    res = run_convert(tmp_path, "--saved_model_dir", directory)
    assert_clean_failure(*res, tmp_path / "out", "['classify', 'embed']", "--saved_model_signature")
    res = run_convert(tmp_path, "--saved_model_dir", directory, "--saved_model_signature", "nope")
    assert_clean_failure(*res, tmp_path / "out", "no signature 'nope'", "['classify', 'embed']")
    xml = convert_model(None, tmp_path, "two_signatures", batch=1, saved_model_dir=directory,
                        saved_model_signature="embed")
    arrays = saved_models.arrays("two_signatures")
    _, out = run_on_daemon(ie, xml, {"image": arrays["in1/image"]})
    (embedding,) = out.values()
    assert rel_err(embedding, arrays["out1/0"]) <= 1e-4
    assert embedding.shape == (1, 4)  # (classify's would be 5 scores)


def test_not_a_saved_model(tmp_path):
    (tmp_path / "empty").mkdir()
    res = run_convert(tmp_path, "--saved_model_dir", str(tmp_path / "empty"))
    assert_clean_failure(*res, tmp_path / "out", "TensorFlow could not freeze the SavedModel", "empty")


@pytest.mark.parametrize("args, needles", [
    (["--saved_model_tags", "serve"], ["--saved_model_tags", "--saved_model_dir"]),
    (["--saved_model_signature", "embed"], ["--saved_model_signature", "--saved_model_dir"]),
    (["--input_checkpoint", "x.ckpt"], ["--input_checkpoint", "--input_meta_graph"]),
    (["--saved_model_dir", "nope_dir"], ["nope_dir", "not a directory"]),
])
def test_option_mistakes(tmp_path, args, needles):
    res = run_convert(tmp_path, *args)
    assert_clean_failure(*res, tmp_path / "out", *needles)


def test_a_checkpoint_of_another_graph(saved_models, tmp_path):
    """The resource graph's checkpoint for the reference graph: the same names w, b - fine;
    a graph with a variable the checkpoint lacks: the variable is named."""
    good = options(saved_models, "tf1_resource_graph_and_checkpoint")
    other = options(saved_models, "tf1_graph_and_checkpoint")
    res = run_convert(tmp_path, "--input_model", other["input_model"], "--input_checkpoint",
                      good["input_checkpoint"])
    assert res[0] == 0, res[1] + res[2]
    build = ("import sys, numpy as np, tensorflow as tf\n"  # (TensorFlow only in a subprocess)
             "g = tf.Graph()\n"
             "with g.as_default():\n"
             "    x = tf.compat.v1.placeholder(tf.float32, [1, 2], name='x')\n"
             "    v = tf.compat.v1.get_variable('not_there', initializer=np.ones(2, np.float32))\n"
             "    tf.identity(x * v, name='out')\n"
             "open(sys.argv[1], 'wb').write(g.as_graph_def().SerializeToString())\n")
    subprocess.run([sys.executable, "-c", build, str(tmp_path / "g.pb")], check=True, timeout=300,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    (tmp_path / "second").mkdir()
    res = run_convert(tmp_path / "second", "--input_model", str(tmp_path / "g.pb"), "--input_checkpoint",
                      good["input_checkpoint"])
    assert_clean_failure(*res, tmp_path / "second" / "out", "has no value for the variable(s) not_there")
