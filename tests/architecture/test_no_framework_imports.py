"""core/ and ir/ never import tensorflow, caffe or pyopencl (they live in worker
processes only), nor the OpenVINO runtime (the tests' reference for IR v11)."""
import ast
import json
import os
import subprocess
import sys

import pytest

from tests.support import REPO, make_caffemodel

FORBIDDEN = ("tensorflow", "caffe", "pyopencl", "openvino")
NET = os.path.join(REPO, "tests", "convert", "nets", "conv_bn_scale.prototxt")


def test_no_import_statement_names_a_framework():
    offenders = []
    for top in ("core", "ir"):
        for root, _, files in os.walk(os.path.join(REPO, top)):
            for f in files:
                if not f.endswith(".py") or f.endswith("_pb2.py"):
                    continue
                path = os.path.join(root, f)
                tree = ast.parse(open(path).read(), path)
                for node in ast.walk(tree):
                    names = []
                    if isinstance(node, ast.Import):
                        names = [a.name for a in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                        names = [node.module]
                    elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                            "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                        names = [str(node.args[0].value)]
                    offenders += ["{}:{} {}".format(path, node.lineno, n) for n in names
                                  if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


@pytest.mark.parametrize("ir_version", ["2", "11"])
def test_a_conversion_loads_no_framework(tmp_path, ir_version):
    weights = str(tmp_path / "m.caffemodel")
    make_caffemodel(NET, weights, positive=("conv1_bn", "conv1_scale", "fc_bn"))
    script = (
        "import sys, json\n"
        "from cli.main import main\n"
        "code = main(['convert', '--input_model', {w!r}, '--input_proto', {p!r}, '--output_dir', {o!r}, '--silent',\n"
        "             '--ir_version', {v!r}])\n"
        "print(json.dumps({{'code': code, 'modules': sorted(sys.modules)}}))\n"
    ).format(w=weights, p=NET, o=str(tmp_path / "out"), v=ir_version)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    loaded = [m for m in result["modules"] if m.split(".")[0] in FORBIDDEN]
    assert loaded == []
    assert os.path.isfile(tmp_path / "out" / "m.xml")
