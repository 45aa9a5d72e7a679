"""convert's exit paths (issue 8 section 4): signals, user code that exits, and
inputs that used to be accepted and produce a damaged IR. Each reproduces the
report and checks the clear outcome."""
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.caffe_models import make_caffemodel
from tests.support import REPO, assert_clean_failure, convert_api, run_cli, wait_until, write_text

NET = """name: "small"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "flat" type: "Flatten" bottom: "pool" top: "flat" }
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("small")
    proto = write_text(str(d / "small.prototxt"), NET)
    weights = str(d / "small.caffemodel")
    make_caffemodel(proto, weights)
    return proto, weights


def convert(outdir, *args):
    return run_cli("convert", "--output_dir", str(outdir), "--model_name", "m", *args)


# --- signals -----------------------------------------------------------------------------
# The real CLI in a child process whose .bin writer pauses after its first chunk (the
# writer's test seam), so the signal arrives while the hidden temporary .bin exists:
# deterministic, no timing guesses.
_SLOW_WRITER = textwrap.dedent("""
    import pathlib, sys, time
    import ir.writer as writer
    _write = writer._write_chunk
    def paused(f, chunk):
        _write(f, chunk)
        f.flush()
        pathlib.Path(sys.argv[1]).touch()
        time.sleep(120)
    writer._write_chunk = paused
    from cli.main import main
    sys.exit(main(sys.argv[2:]))
""")


def start_paused_convert(tmp_path, small, outdir):
    script = write_text(str(tmp_path / "slow_convert.py"), _SLOW_WRITER)
    marker = tmp_path / "writing"
    proc = subprocess.Popen([sys.executable, script, str(marker), "convert", "--input_model", small[1],
                             "--input_proto", small[0], "--output_dir", str(outdir), "--model_name", "m"],
                            cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert wait_until(lambda: marker.exists() or proc.poll() is not None, 120), "the convert never started writing"
    assert proc.poll() is None, proc.communicate()
    temps = [f for f in os.listdir(outdir) if f.startswith(".m.bin.") and f.endswith(".tmp")]
    assert len(temps) == 1, os.listdir(outdir)
    return proc


def test_sigterm_while_writing_leaves_no_file(tmp_path, small):
    out = tmp_path / "out"
    proc = start_paused_convert(tmp_path, small, out)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    assert "[ ERROR ]  Terminated (SIGTERM)." in stderr and "Traceback" not in stderr
    assert os.listdir(out) == []


def test_a_killed_writers_temp_files_are_removed_by_the_next_run(tmp_path, small):
    out = tmp_path / "out"
    proc = start_paused_convert(tmp_path, small, out)
    proc.kill()  # SIGKILL: no handler runs, the temporary .bin stays
    proc.communicate(timeout=60)
    (left,) = os.listdir(out)
    assert left.startswith(".m.bin.{}.".format(proc.pid))
    # a live writer's files (this test process's pid) and other names are not ours to remove
    live = ".m.bin.{}.{}.tmp".format(os.getpid(), "ab" * 6)
    other = ".other.bin.{}.{}.tmp".format(proc.pid, "cd" * 6)
    for name in (live, other):
        (out / name).write_bytes(b"x")
    code, _, err = convert(out, "--input_model", small[1], "--input_proto", small[0])
    assert code == 0, err
    assert sorted(os.listdir(out)) == sorted([live, other, "m.bin", "m.xml"])


# --- user code that exits ----------------------------------------------------------------
def test_an_extension_calling_sys_exit_at_import_is_an_error(tmp_path, small):
    ext = tmp_path / "ext"
    (ext / "ops").mkdir(parents=True)
    bad = write_text(str(ext / "ops" / "quitter.py"), "import sys\nsys.exit(0)\n")
    res = convert(tmp_path / "out", "--input_model", small[1], "--input_proto", small[0], "--extensions", str(ext))
    assert_clean_failure(*res, tmp_path / "out", bad, "sys.exit(0)")


def test_an_extractor_calling_sys_exit_is_an_error_naming_its_line(tmp_path, small):
    ext = tmp_path / "ext"
    (ext / "front" / "caffe").mkdir(parents=True)
    bad = write_text(str(ext / "front" / "caffe" / "relu_ext.py"), textwrap.dedent("""\
        import sys
        from core.front.extractor import FrontExtractorOp

        class ReluExit(FrontExtractorOp):
            op = "ReLU"

            @staticmethod
            def extract(node):
                sys.exit(3)
        """))
    res = convert(tmp_path / "out", "--input_model", small[1], "--input_proto", small[0], "--extensions", str(ext))
    assert_clean_failure(*res, tmp_path / "out", "{}, line 9".format(bad), "sys.exit(3)", "'extract'")


def test_an_extractor_that_raises_is_named_with_its_file_and_line(tmp_path, small):
    ext = tmp_path / "ext"
    (ext / "front" / "caffe").mkdir(parents=True)
    write_text(str(ext / "front" / "caffe" / "relu_ext.py"), textwrap.dedent("""\
        from core.front.extractor import FrontExtractorOp

        class ReluRaise(FrontExtractorOp):
            op = "ReLU"

            @staticmethod
            def extract(node):
                raise ValueError("boom in extractor")
        """))
    res = convert(tmp_path / "out", "--input_model", small[1], "--input_proto", small[0], "--extensions", str(ext))
    assert_clean_failure(*res, tmp_path / "out", "ValueError: boom in extractor", "ReluRaise in ",
                         "relu_ext.py, line 8")


# --- values that used to be accepted -----------------------------------------------------
def variant(tmp_path, old, new):
    proto = write_text(str(tmp_path / "variant.prototxt"), NET.replace(old, new))
    weights = str(tmp_path / "variant.caffemodel")
    make_caffemodel(proto, weights)
    return proto, weights


def test_pooling_stride_zero(tmp_path):
    proto, weights = variant(tmp_path, "kernel_size: 2 stride: 2", "kernel_size: 2 stride: 0")
    res = convert(tmp_path / "out", "--input_model", weights, "--input_proto", proto)
    assert_clean_failure(*res, tmp_path / "out", "Pooling 'pool'", "'stride' is 0,0; it must be at least 1")


def test_convolution_dilation_zero(tmp_path):
    proto, weights = variant(tmp_path, "kernel_size: 3 pad: 1", "kernel_size: 3 pad: 1 dilation: 0")
    res = convert(tmp_path / "out", "--input_model", weights, "--input_proto", proto)
    assert_clean_failure(*res, tmp_path / "out", "Convolution 'conv'", "'dilation' is 0,0; it must be at least 1")


def test_a_flatten_whose_element_count_overflows_int64(tmp_path):
    # 2^62 elements per channel fit int64; x4 channels (x1 after pooling is not the
    # point) do not: the Flatten would have written [1, 0]
    proto = write_text(str(tmp_path / "huge.prototxt"), """name: "huge"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 4 dim: 2147483648 dim: 2147483648 } } }
layer { name: "flat" type: "Flatten" bottom: "data" top: "flat" }
""")
    weights = str(tmp_path / "huge.caffemodel")
    make_caffemodel(proto, weights)
    res = convert(tmp_path / "out", "--input_model", weights, "--input_proto", proto)
    assert_clean_failure(*res, tmp_path / "out", "'data'", "18446744073709551616 elements", "--input_shape")


def test_an_input_shape_beyond_int64(tmp_path, small):
    res = convert(tmp_path / "out", "--input_model", small[1], "--input_proto", small[0], "--input_shape",
                  "[1,3,{},8]".format(2**70))
    assert_clean_failure(*res, tmp_path / "out", "more than int64 can count", "#56")


@pytest.mark.parametrize("option, value, needle", [
    ("--scale", "1e-45", "cannot be represented in float32"),
    ("--scale_values", "(1e-45,1,1)", "cannot be represented in float32"),
    ("--mean_values", "(1e39,0,0)", "1e+39 is not a finite float32 number"),
])
def test_preprocessing_values_beyond_float32(tmp_path, small, option, value, needle):
    res = convert(tmp_path / "out", "--input_model", small[1], "--input_proto", small[0], option, value)
    assert_clean_failure(*res, tmp_path / "out", needle)


def test_nan_and_inf_weights_are_named_in_a_warning(tmp_path):
    proto = write_text(str(tmp_path / "nan.prototxt"), NET)
    weights = str(tmp_path / "nan.caffemodel")
    w = np.zeros((4, 3, 3, 3), np.float32)
    w[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    make_caffemodel(proto, weights, blobs={"conv": [w, np.zeros(4, np.float32)]})
    code, out, err = convert(tmp_path / "out", "--input_model", weights, "--input_proto", proto)
    assert code == 0, err
    assert ("[ WARNING ]  Layer 'conv' (Convolution): its blob 'weights' has 1 NaN and 2 infinite values of 108."
            in out), out
    assert convert_api(input_model=weights, input_proto=proto).layer_by_name("conv").blobs["weights"].size == 108
