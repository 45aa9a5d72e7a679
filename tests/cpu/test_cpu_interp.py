"""The built-in Interp kernel against an independent numpy reference of Caffe's
interp2, for every way the output size is given. Expected sizes are worked out
here by hand from the rules the reference Model Optimizer documents."""
import numpy as np
import pytest

from tests.cpu.cpu_helpers import run_single
from tests.numpy_reference import caffe_interp

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("data, in_shape, out_hw", [
    ({"zoom_factor": 2}, (2, 3, 5, 7), (10, 14)),                                   # multiply: in * zoom
    ({"zoom_factor": 2, "zoom_rule": "deeplab"}, (2, 3, 5, 7), (9, 13)),            # in + (in - 1) * (zoom - 1)
    ({"zoom_factor": 3, "zoom_rule": "deeplab"}, (1, 2, 4, 4), (10, 10)),
    ({"shrink_factor": 2}, (1, 2, 9, 8), (5, 4)),                                   # (in - 1) // shrink + 1
    ({"height": 6, "width": 11}, (1, 4, 3, 4), (6, 11)),
    ({"zoom_factor": 2, "shrink_factor": 3}, (1, 2, 10, 7), (7, 5)),               # shrink, then DeepLab zoom
    ({"zoom_factor": 2, "pad_beg": -1, "pad_end": -1}, (1, 2, 7, 9), (10, 14)),     # crop 1 each side, then zoom
    ({"height": 1, "width": 1}, (1, 2, 3, 3), (1, 1)),
])
def test_interp_sizes_and_values(tmp_path, data, in_shape, out_hw):
    x = RNG.standard_normal(in_shape).astype(np.float32)
    out_shape = in_shape[:2] + out_hw
    (got,), _ = run_single(tmp_path, "Interp", data, [x], [out_shape])
    assert got.shape == out_shape
    ref = caffe_interp(x, *out_hw, data.get("pad_beg", 0), data.get("pad_end", 0))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_interp_to_the_size_of_a_second_input(tmp_path):
    x = RNG.standard_normal((1, 3, 4, 5)).astype(np.float32)
    like = np.zeros((1, 1, 7, 3), np.float32)
    (got,), plan = run_single(tmp_path, "Interp", {}, [x, like], [(1, 3, 7, 3)])
    np.testing.assert_allclose(got, caffe_interp(x, 7, 3), rtol=1e-5, atol=1e-5)


def test_interp_recomputes_the_size_for_another_input_size(tmp_path):
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    (_,), plan = run_single(tmp_path, "Interp", {"zoom_factor": 2}, [x], [(1, 2, 8, 8)])
    plan.reshape({"in0": (3, 2, 5, 6)})
    y = RNG.standard_normal((3, 2, 5, 6)).astype(np.float32)
    got = plan.infer({"in0": y})["layer"]
    assert got.shape == (3, 2, 10, 12)
    np.testing.assert_allclose(got, caffe_interp(y, 10, 12), rtol=1e-5, atol=1e-5)
