"""TensorFlow models get IR version 11 from the same pipeline (`--ir_version 11`): the
Keras applications and every small graph, written as IR v11 and compiled by the
real OpenVINO runtime (f32), equal TensorFlow within 1e-4 after NCHW -> NHWC (the
small graphs' FP16 IRs within 1e-2), as their IR v2 does on the CPU daemon."""
import os

import numpy as np
import pytest

from ir import read_ir
from tests.ir_v11.v11_helpers import compile_v11, import_openvino
from tests.tf.test_tf_ops import CASES
from tests.tf.tf_helpers import compare_with_tf, nchw, nhwc


@pytest.fixture(scope="module")
def ov_core():
    return import_openvino().Core()


def run_on_openvino(core, xml, feeds, nhwc_io=False):
    """run_on_daemon's contract for OpenVINO: the converted IR v2 read back, written
    as IR v11, compiled (f32) and run on TensorFlow-layout feeds."""
    name = os.path.splitext(os.path.basename(xml))[0] + "_v11"
    run = compile_v11(core, read_ir(xml), os.path.dirname(xml), name=name)
    out = run.infer({k: v if nhwc_io else nchw(v) for k, v in feeds.items()})
    return None, {k: np.array(v if nhwc_io else nhwc(np.asarray(v))) for k, v in out.items()}


@pytest.mark.parametrize("app", ["mobilenet_v2", "resnet50", "inception_v3"])
def test_keras_applications(ov_core, keras_apps, tmp_path, app):
    compare_with_tf(ov_core, keras_apps, app, tmp_path, run=run_on_openvino)


def test_resnet50_batch_2(ov_core, keras_apps, tmp_path):
    compare_with_tf(ov_core, keras_apps, "resnet50", tmp_path, batch=2, run=run_on_openvino)


@pytest.mark.parametrize("case", CASES)
def test_small_graphs(ov_core, tf_graphs, tmp_path, case):
    compare_with_tf(ov_core, tf_graphs, case, tmp_path, run=run_on_openvino)


@pytest.mark.parametrize("case", CASES)
def test_small_graphs_fp16(ov_core, tf_graphs, tmp_path, case):
    compare_with_tf(ov_core, tf_graphs, case, tmp_path, data_type="FP16", tol=1e-2, run=run_on_openvino)
