"""A TensorFlow graph converts with no TensorFlow at all: the graph is written with
the project's own schema, converted, run by the CPU plan in this process and
compared with numpy's own computation. `tox -e core` runs this file in an
environment without TensorFlow; the import checks below run everywhere."""
import json
import os
import subprocess
import sys

import numpy as np

from tests.support import REPO
from tests.tf.own_graphs import save, small_cnn, small_cnn_reference

FORBIDDEN = ("tensorflow", "keras", "caffe", "pyopencl")


def test_own_graph_converts_and_runs(tmp_path):
    from device_daemons.cpu import ExecutionPlan
    from ir import read_ir
    from tests.tf.tf_helpers import convert_model, nchw
    g, wt = small_cnn()
    pb = save(g, tmp_path / "cnn.pb")
    xml = convert_model(pb, tmp_path, "cnn", batch=2)
    net = read_ir(xml)
    assert [l.type for l in net.layers] == ["Input", "Convolution", "ReLU", "Pooling", "Permute", "Reshape",
                                            "FullyConnected", "SoftMax"]
    x = np.random.default_rng(1).standard_normal((2, 8, 8, 3)).astype(np.float32)
    out = ExecutionPlan(net).infer({"x": nchw(x)})
    assert list(out) == ["prob"]
    np.testing.assert_allclose(out["prob"], small_cnn_reference(x, wt), rtol=1e-4, atol=1e-6)


def test_text_graph_converts_the_same(tmp_path):
    from ir import read_ir
    from tests.tf.tf_helpers import convert_model
    g, _ = small_cnn()
    a = read_ir(convert_model(save(g, tmp_path / "cnn.pb"), tmp_path / "bin", "cnn", batch=1))
    b = read_ir(convert_model(save(g, tmp_path / "cnn.pbtxt", text=True), tmp_path / "txt", "cnn", batch=1,
                              input_model_is_text=True))
    assert a.layers == b.layers and a.edges == b.edges


def _convert_in_fresh_process(tmp_path, *flags):
    g, _ = small_cnn()
    pb = save(g, tmp_path / "cnn.pb")
    script = (
        "import sys, json\n"
        "from cli.main import main\n"
        "code = main(['convert', '--input_model', {pb!r}, '-b', '1', '--output_dir', {out!r}, '--silent'])\n"
        "print(json.dumps({{'code': code, 'modules': sorted(sys.modules)}}))\n"
    ).format(pb=pb, out=str(tmp_path / "out"))
    return subprocess.run([sys.executable, *flags, "-c", script], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=REPO))


def test_converting_a_pb_imports_no_framework(tmp_path):
    proc = _convert_in_fresh_process(tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    assert [m for m in result["modules"] if m.split(".")[0] in FORBIDDEN] == []
    assert os.path.isfile(tmp_path / "out" / "cnn.xml")


def test_importtime_shows_no_tensorflow(tmp_path):
    proc = _convert_in_fresh_process(tmp_path, "-X", "importtime")
    assert proc.returncode == 0, proc.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    assert "core.front.tf.loader" in imported  # the listing is real
    assert [m for m in imported if m.split(".")[0] in FORBIDDEN] == []
