"""`mo-core convert --ir_version 11` end to end, as the issue's user runs it: the
files it writes load in a fresh Python with only `import openvino`, carry our
version and the conversion options in rt_info, and a failing conversion leaves an
earlier IR at the same path untouched."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np

from tests.ir_v11.v11_helpers import F32, assert_close, caffe_forward, import_openvino
from tests.support import REPO, import_caffe, run_cli

EXAMPLE_EXT = os.path.join(REPO, "tests", "custom_layers", "example_ext")


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_convert_ir_version_11_fp16_runs_on_openvino(small_nets, tmp_path):
    proto, weights = small_nets["conv_bn_scale"]
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("convert", "--input_model", weights, "--input_proto", proto, "--ir_version", "11",
                                   "--data_type", "FP16", "--output_dir", str(out), "--model_name", "m")
    assert code == 0, stdout + stderr
    assert "[ SUCCESS ] Generated IR version 11 model." in stdout
    assert sorted(os.listdir(out)) == ["m.bin", "m.xml"]
    with open(out / "m.xml") as f:
        assert '<net name="m" version="11">' in f.read()
    # the acceptance command, in a fresh interpreter
    check = subprocess.run([sys.executable, "-c", "import openvino as ov; m = ov.Core().compile_model("
                            f"{str(out / 'm.xml')!r}, 'CPU')"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    ov = import_openvino()
    core = ov.Core()
    model = core.read_model(str(out / "m.xml"))
    assert model.get_rt_info(["generator"]).astype(str).startswith("mo-core ")
    assert model.get_rt_info(["conversion_parameters", "data_type"]).astype(str) == "FP16"
    assert model.get_rt_info(["conversion_parameters", "ir_version"]).astype(str) == "11"
    assert model.get_rt_info(["conversion_parameters", "input_model"]).astype(str) == os.path.abspath(weights)
    compiled = core.compile_model(model, "CPU", F32)
    x = np.random.default_rng(8).standard_normal((1, 3, 10, 10)).astype(np.float32)
    caffe = import_caffe()
    ref = caffe_forward(caffe.Net(proto, weights, caffe.TEST), {"data": x})
    assert_close(compiled({"data": x})["fc_bn"], ref["fc_bn"], 1e-2, "FP16 IR v11")


def test_failed_conversion_keeps_the_earlier_ir(small_nets, tmp_path):
    proto, weights = small_nets["conv_bn_scale"]
    out = tmp_path / "out"
    args = ["convert", "--input_model", weights, "--ir_version", "11", "--output_dir", str(out), "--model_name", "m",
            "--extensions", EXAMPLE_EXT]
    code, stdout, stderr = run_cli(*args, "--input_proto", proto)
    assert code == 0, stdout + stderr
    before = {name: _digest(out / name) for name in os.listdir(out)}
    bad = tmp_path / "bad.prototxt"
    with open(proto) as f:  # the same net with a layer (from an extension) OpenVINO has no operation for
        bad.write_text(f.read() + 'layer { name: "odd" type: "BNLL" bottom: "fc_bn" top: "odd" }\n')
    code, stdout, stderr = run_cli(*args, "--input_proto", str(bad))
    assert code == 1 and "Traceback" not in stderr
    assert "IR version 11 cannot express 1 layer(s): 'odd' (BNLL)" in stderr
    assert {name: _digest(out / name) for name in os.listdir(out)} == before
