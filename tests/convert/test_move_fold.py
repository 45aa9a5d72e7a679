"""core/middle/move_fold.py on Caffe nets (real pycaffe next to the converted IR): Permutes
that cancel around a layer computing each value alone are gone, two Permutes in a row
are one, a Permute goes above a Softmax where that makes the Softmax's axis the
innermost, and nothing moves where a tensor on the way is read twice or is an output.
(The biases folded through moves: Keras' patterns in tests/tf/test_tf_ops.py.)"""
from __future__ import annotations

import numpy as np
import pytest

from tests.cpu.cpu_helpers import caffe_case

CONV = """layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 6 kernel_size: 1 } }
"""


def permute(name, bottom, order):
    orders = " ".join("order: {}".format(a) for a in order)
    return 'layer {{ name: "{}" type: "Permute" bottom: "{}" top: "{}" permute_param {{ {} }} }}\n'.format(
        name, bottom, name, orders)


OUT = 'layer { name: "out" type: "Power" bottom: "BOTTOM" top: "out" power_param { scale: 2 } }\n'
NETS = {
    # (the net, Permutes left, the Softmax's axis)
    "cancel around ReLU": (CONV + permute("p1", "conv", (0, 2, 3, 1))
                           + 'layer { name: "relu" type: "ReLU" bottom: "p1" top: "relu" }\n'
                           + permute("p2", "relu", (0, 3, 1, 2)) + OUT.replace("BOTTOM", "p2"), 0, None),
    "two in a row": (CONV + permute("p1", "conv", (0, 2, 3, 1)) + permute("p2", "p1", (0, 2, 3, 1))
                     + OUT.replace("BOTTOM", "p2"), 1, None),
    "softmax axis innermost": (CONV + 'layer { name: "sm" type: "Softmax" bottom: "conv" top: "sm" }\n'
                               + permute("p1", "sm", (0, 2, 3, 1)) + OUT.replace("BOTTOM", "p1"), 1, 3),
    "relu read twice": (CONV + permute("p1", "conv", (0, 2, 3, 1))
                        + 'layer { name: "relu" type: "ReLU" bottom: "p1" top: "relu" }\n'
                        + permute("p2", "relu", (0, 3, 1, 2)) + OUT.replace("BOTTOM", "p2")
                        + 'layer { name: "other" type: "Power" bottom: "relu" top: "other" }\n', 2, None),
    "first one read twice": (CONV + permute("p1", "conv", (0, 2, 3, 1)) + permute("p2", "p1", (0, 3, 1, 2))
                       + OUT.replace("BOTTOM", "p2")
                       + 'layer { name: "seen" type: "Power" bottom: "p1" top: "seen" }\n', 2, None),
    "equal moves of one tensor merge": (CONV + permute("p1", "conv", (0, 2, 3, 1)) + permute("p2", "conv", (0, 2, 3, 1))
                                        + OUT.replace("BOTTOM", "p1")
                                        + 'layer { name: "twin" type: "Power" bottom: "p2" top: "twin" }\n', 1, None),
}



@pytest.mark.parametrize("case", sorted(NETS))
def test_permutes_cancel_compose_and_move_up_only_where_nothing_else_reads(tmp_path, case):
    text, permutes, softmax_axis = NETS[case]
    c = caffe_case(tmp_path, text, {"data": (1, 4, 3, 5)})
    types = [layer.type for layer in c.network.layers]
    assert types.count("Permute") == permutes, types
    if softmax_axis is not None:
        (softmax,) = [layer for layer in c.network.layers if layer.type == "SoftMax"]
        assert int(softmax.data["axis"]) == softmax_axis
    ours, ref = c.run()
    for name in ours:
        np.testing.assert_allclose(ours[name], ref[name], rtol=1e-5, atol=1e-5 * np.abs(ref[name]).max())
