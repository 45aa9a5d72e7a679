"""TensorFlow models get IR v11 from the same converted network: the TF front end's
op graphs (tests/tf/graphs.py) and Keras applications, written as IR v11 and run
by OpenVINO, equal TensorFlow within 1e-4 (FP32) and the small graphs within 1e-2
as FP16 IRs, exactly as their IR v2 on the CPU daemon (tests/tf/)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from ir import read_ir
from tests.ir_v11.v11_helpers import compile_v11
from tests.tf.test_tf_keras_apps import APPS
from tests.tf.test_tf_ops import CASES
from tests.tf.tf_helpers import compare_with_tf, nchw, nhwc


def run_on_openvino(core, xml, feeds, nhwc_io=False):
    """run_on_daemon's contract for OpenVINO: the converted IR v2 read back, written
    as IR v11, compiled (f32) and run on TensorFlow-layout feeds."""
    name = os.path.splitext(os.path.basename(xml))[0] + "_v11"
    run = compile_v11(core, read_ir(xml), os.path.dirname(xml), name=name)
    out = run.infer({k: v if nhwc_io else nchw(v) for k, v in feeds.items()})
    return None, {k: np.array(v if nhwc_io else nhwc(np.asarray(v))) for k, v in out.items()}


@pytest.mark.parametrize("case", CASES)
def test_tf_graph_fp32_equals_tensorflow(ov_core, tf_graphs, tmp_path, case):
    compare_with_tf(ov_core, tf_graphs, case, tmp_path, run=run_on_openvino)


@pytest.mark.parametrize("case", CASES)
def test_tf_graph_fp16_equals_tensorflow(ov_core, tf_graphs, tmp_path, case):
    compare_with_tf(ov_core, tf_graphs, case, tmp_path, data_type="FP16", tol=1e-2, run=run_on_openvino)


@pytest.mark.parametrize("app", APPS)
def test_keras_app_equals_tensorflow(ov_core, keras_apps, tmp_path, app):
    compare_with_tf(ov_core, keras_apps, app, tmp_path, run=run_on_openvino)


def test_resnet50_batch_2(ov_core, keras_apps, tmp_path):
    compare_with_tf(ov_core, keras_apps, "resnet50", tmp_path, batch=2, run=run_on_openvino)
