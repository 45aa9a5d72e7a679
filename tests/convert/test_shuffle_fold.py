"""core/middle/shuffle_fold.py: a last-axis shuffle (Slice into 4, Concat in the order
1, 0, 3, 2: the OD API's box coder swap) folded into the convolution producing the
tensor where every value moves with its channel, and left alone where it does not.
Each case is a real Caffe net run by pycaffe next to the converted IR."""
from __future__ import annotations

import numpy as np
import pytest

from tests.cpu.cpu_helpers import caffe_case

CONV = """layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 12 kernel_size: 1 } }
"""
PERMUTE = """layer { name: "perm" type: "Permute" bottom: "BOTTOM" top: "perm"
  permute_param { order: 0 order: 2 order: 3 order: 1 } }
"""
SWAP = """layer { name: "flat" type: "Reshape" bottom: "BOTTOM" top: "flat"
  reshape_param { shape { dim: 0 dim: -1 dim: 4 } } }
layer { name: "slice" type: "Slice" bottom: "flat" top: "s0" top: "s1" top: "s2" top: "s3" slice_param { axis: 2 } }
layer { name: "swap" type: "Concat" bottom: "s1" bottom: "s0" bottom: "s3" bottom: "s2" top: "swap"
  concat_param { axis: 2 } }
"""
OUT = """layer { name: "out" type: "Reshape" bottom: "swap" top: "out" reshape_param { shape { dim: 0 dim: -1 } } }
"""
HEADS = {
    # the box predictor's layout: channels last, then rows of 4 - the swap is a channel permutation
    "folded": CONV + PERMUTE.replace("BOTTOM", "conv") + SWAP.replace("BOTTOM", "perm") + OUT,
    # rows of 4 taken across the spatial positions of each channel: no channel permutation does it
    "spatial rows": CONV + SWAP.replace("BOTTOM", "conv") + OUT,
    # a ReLU between: not a layer that only moves values
    "relu between": CONV + """layer { name: "relu" type: "ReLU" bottom: "conv" top: "relu" }
""" + PERMUTE.replace("BOTTOM", "relu") + SWAP.replace("BOTTOM", "perm") + OUT,
    # the convolution's output is read elsewhere too: it must keep its channels
    "read twice": CONV + PERMUTE.replace("BOTTOM", "conv") + SWAP.replace("BOTTOM", "perm") + OUT + """layer {
  name: "other" type: "Power" bottom: "conv" top: "other" power_param { scale: 2 } }
""",
}


@pytest.mark.parametrize("case", sorted(HEADS))
def test_a_last_axis_shuffle_is_folded_only_where_values_move_with_their_channel(tmp_path, case):
    c = caffe_case(tmp_path, HEADS[case], {"data": (1, 8, 3, 5)})
    types = [layer.type for layer in c.network.layers]
    assert ("Split" not in types) == (case == "folded"), types
    ours, ref = c.run()
    assert set(ours) == ({"out", "other"} if case == "read twice" else {"out"}), list(ours)
    for name in ours:
        np.testing.assert_allclose(ours[name], ref[name], rtol=1e-5, atol=1e-5 * np.abs(ref[name]).max())


def test_a_shuffle_that_is_a_network_output_keeps_its_name(tmp_path):
    c = caffe_case(tmp_path, HEADS["folded"].replace(OUT, ""), {"data": (1, 8, 3, 5)})
    assert "Split" in [layer.type for layer in c.network.layers]
    ours, ref = c.run()
    np.testing.assert_allclose(ours["swap"], ref["swap"], rtol=1e-5, atol=1e-5 * np.abs(ref["swap"]).max())
