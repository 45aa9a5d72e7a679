"""extgen end to end for a Caffe layer only pycaffe knows (brocolli-Caffe's
HardSigmoid: y = clamp(alpha * x + beta, 0, 1)): the silent mode generates the files
from the shipped example configuration, they pass pyflakes and import; the test fills
the marked bodies with a line each, the model converts with --extensions and runs on
the CPU daemon with -l, and the GPU kernel on OpenCL, equal to pycaffe."""
import os

import numpy as np
import pytest

from tests.extgen.conftest import CL_BODY, CPU_BODY, example_config
from tests.extgen.extgen_helpers import fill, import_in_subprocess, lint, python_files, tree, write_config
from tests.support import run_cli

@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    d = tmp_path_factory.mktemp("extgen_silent")
    config = write_config(d / "config.extgen.json", example_config(output_dir=str(d / "out")))
    code, out, err = run_cli("extgen", config)
    assert code == 0, err
    return str(d / "out"), out


def test_silent_mode_writes_the_reference_tree(generated):
    root, out = generated
    assert sorted(tree(root)) == [
        "user_ie_extensions/cpu/ext_hardsigmoid.py",
        "user_ie_extensions/gpu/hardsigmoid.cl",
        "user_ie_extensions/gpu/hardsigmoid.xml",
        "user_mo_extensions/__init__.py",
        "user_mo_extensions/front/__init__.py",
        "user_mo_extensions/front/caffe/__init__.py",
        "user_mo_extensions/front/caffe/hardsigmoid_ext.py",
        "user_mo_extensions/front/tf/__init__.py",
        "user_mo_extensions/ops/__init__.py",
        "user_mo_extensions/ops/hardsigmoid.py",
    ]
    # the screen lists exactly the two bodies to write (the op keeps its shape: nothing to fill there)
    assert "user_ie_extensions/cpu/ext_hardsigmoid.py:23: the computation of HardSigmoid" in out
    assert "user_ie_extensions/gpu/hardsigmoid.cl:14: compute output[out_id] of HardSigmoid" in out
    assert out.count("FILL IN") == 1 and len([line for line in out.splitlines() if line.startswith("  /")]) == 2


def test_generated_files_pass_pyflakes_and_import(generated):
    root, _ = generated
    files = python_files(root)
    assert len(files) == 8
    assert lint(files) == []
    proc = import_in_subprocess(files)
    assert proc.returncode == 0, proc.stderr


def test_unfilled_kernels_fail_loudly(generated, model, ie, gpu_device, tmp_path):
    """Before the user writes them, the CPU kernel raises and the OpenCL kernel does not build: each says what
    to fill in where (never a silently wrong result)."""
    root, _ = generated
    proto, weights, x_path, x, _ = model
    out = tmp_path / "ir"
    code, _, err = run_cli("convert", "--input_model", weights, "--input_proto", proto, "--output_dir", str(out),
                           "--extensions", os.path.join(root, "user_mo_extensions"))
    assert code == 0, err  # the extractor and the op need nothing filled in
    kernel = os.path.join(root, "user_ie_extensions", "cpu", "ext_hardsigmoid.py")
    code, _, err = run_cli("infer", "-m", str(out / "hsig.xml"), "-i", x_path, "-l", kernel)
    assert code == 1 and "extgen: fill in the computation of HardSigmoid" in err, err
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.custom import CustomLayers
    from ir import read_ir
    with pytest.raises(Exception, match="extgen: the computation of HardSigmoid is not written yet"):
        GpuPlan(read_ir(str(out / "hsig.xml")), gpu_device,
                custom_layers=CustomLayers(os.path.join(root, "user_ie_extensions", "gpu", "hardsigmoid.xml")))


def test_filled_extension_converts_and_runs_on_cpu_and_gpu_equal_to_pycaffe(generated, model, ie, gpu_device,
                                                                          tmp_path):
    import shutil
    root = str(tmp_path / "ext")
    shutil.copytree(generated[0], root)
    proto, weights, x_path, x, reference = model
    fill(os.path.join(root, "user_ie_extensions", "cpu", "ext_hardsigmoid.py"), CPU_BODY)
    fill(os.path.join(root, "user_ie_extensions", "gpu", "hardsigmoid.cl"), CL_BODY)
    assert lint(python_files(root)) == []
    out = tmp_path / "ir"
    code, _, err = run_cli("convert", "--input_model", weights, "--input_proto", proto, "--output_dir", str(out),
                           "--extensions", os.path.join(root, "user_mo_extensions"))
    assert code == 0, err
    from ir import read_ir
    network = read_ir(str(out / "hsig.xml"))
    layer = next(l for l in network.layers if l.type == "HardSigmoid")
    assert float(layer.data["alpha"]) == pytest.approx(0.3) and float(layer.data["beta"]) == pytest.approx(0.4)
    kernel = os.path.join(root, "user_ie_extensions", "cpu", "ext_hardsigmoid.py")
    code, _, err = run_cli("infer", "-m", str(out / "hsig.xml"), "-i", x_path, "-l", kernel, "-o",
                           str(tmp_path / "y.npz"), "-infer_precision", "f32")  # compared with pycaffe
    assert code == 0, err
    ref = reference.blobs["conv2"].data
    ours = np.load(str(tmp_path / "y.npz"))["conv2"]
    assert np.abs(ours - ref).max() <= 1e-4 * np.abs(ref).max()
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.custom import CustomLayers
    plan = GpuPlan(network, gpu_device,
                   custom_layers=CustomLayers(os.path.join(root, "user_ie_extensions", "gpu", "hardsigmoid.xml")),
                   extra_outputs=["hsig"])
    gpu = plan.infer({"data": x})
    assert np.abs(gpu["hsig"] - reference.blobs["hsig"].data).max() <= 1e-5
    assert np.abs(gpu["conv2"] - ref).max() <= 1e-4 * np.abs(ref).max()
