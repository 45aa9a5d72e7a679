"""One file per custom op: `extgen --one-file` writes the extractor, the op with its
shape function and the CPU kernel into one Python file; the same file goes to the
converter (--extensions FILE) and to inference (-l FILE / add_extension). Checked
for a Caffe layer (HardSigmoid, against pycaffe) and a TensorFlow op (Erf, against
TensorFlow), each after filling the marked body."""
import os

import numpy as np

from tests.extgen.conftest import CPU_BODY, example_config
from tests.extgen.extgen_helpers import fill, import_in_subprocess, lint, tree, write_config
from tests.support import run_cli

ERF = {"output_dir": None, "one_file": True, "mo_op": True, "mo_tf_ext": True, "ie_cpu_ext": True,
       "op": {"name": "Erf", "changes_shape": False},
       "tf": {"layer": "Erf", "op": "Erf", "params": []},
       "cpu": {"name": "Erf", "params": []}}


def generate(tmp_path, config) -> str:
    code, out, err = run_cli("extgen", write_config(tmp_path / "config.json", config))
    assert code == 0, err
    files = tree(config["output_dir"])
    assert len(files) == 1, sorted(files)
    path = os.path.join(config["output_dir"], next(iter(files)))
    assert lint([path]) == []
    proc = import_in_subprocess([path])
    assert proc.returncode == 0, proc.stderr
    return path


def test_one_file_caffe_extension_for_conversion_and_inference(model, ie, tmp_path):
    proto, weights, x_path, _, reference = model
    config = example_config(output_dir=str(tmp_path / "ext"), one_file=True, ie_gpu_ext=False)
    path = generate(tmp_path, config)
    assert path.endswith("user_extensions/hardsigmoid.py")
    text = open(path).read()
    for cls in ("class HardSigmoidFrontExtractor(FrontExtractorOp)", "class HardSigmoidOp(Op)",
                "class HardSigmoidKernel"):
        assert cls in text
    assert "HardSigmoidOp.update_node_stat(node, attrs)" in text  # the extractor uses the op of this file
    fill(path, CPU_BODY)
    out = tmp_path / "ir"
    # --validate runs the IR with the file's CPU kernel, against pycaffe
    code, stdout, err = run_cli("convert", "--input_model", weights, "--input_proto", proto, "--output_dir", str(out),
                                "--extensions", path, "--validate")
    assert code == 0, err
    assert "vs Caffe" in stdout and "OK" in stdout
    code, _, err = run_cli("infer", "-m", str(out / "hsig.xml"), "-i", x_path, "-l", path, "-o",
                           str(tmp_path / "y.npz"), "-infer_precision", "f32")  # compared with pycaffe
    assert code == 0, err
    ref = reference.blobs["conv2"].data
    assert np.abs(np.load(str(tmp_path / "y.npz"))["conv2"] - ref).max() <= 1e-4 * np.abs(ref).max()


def test_one_file_tf_extension_equals_tensorflow(ie, tmp_path):
    from benchmarks.built_models import Models, built
    from tests.tf.tf_helpers import compare_with_tf
    graphs = Models(built("graphs"))
    path = generate(tmp_path, dict(ERF, output_dir=str(tmp_path / "ext")))
    fill(path, "from scipy.special import erf", "outputs = [erf(inputs[0])]")
    ie.add_extension(path, "CPU")
    compare_with_tf(ie, graphs, "erf_extension", tmp_path, extensions=path)
