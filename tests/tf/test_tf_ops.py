"""One small TensorFlow graph per op / attribute case (tests/tf/graphs.py), converted
without TensorFlow and run on the CPU daemon: equal to TensorFlow within 1e-4
relative (FP32) and 1e-2 (FP16 IR), outputs compared after NCHW -> NHWC."""
import os
import re

import pytest

from tests.tf.tf_helpers import compare_with_tf

with open(os.path.join(os.path.dirname(__file__), "graphs.py")) as _f:
    ALL = re.findall(r'^@case\("(\w+)"', _f.read(), re.M)
# needing an option to convert: tested in test_tf_options.py
SPECIAL = {"erf_extension"}
CASES = [c for c in ALL if c not in SPECIAL]


def test_there_are_enough_cases(tf_graphs):
    assert len(CASES) >= 30
    assert sorted(tf_graphs.index) == sorted(ALL)


@pytest.mark.parametrize("case", CASES)
def test_fp32_equals_tensorflow(ie, tf_graphs, tmp_path, case):
    compare_with_tf(ie, tf_graphs, case, tmp_path)


@pytest.mark.parametrize("case", CASES)
def test_fp16_ir_equals_tensorflow(ie, tf_graphs, tmp_path, case):
    compare_with_tf(ie, tf_graphs, case, tmp_path, data_type="FP16", tol=1e-2)
