"""Shared builders for the IR tests.

Test modules are named test_ir_*.py and tests/ir has no __init__.py: a package named
`ir` here would shadow the real `ir` package under test.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from ir import Edge, Layer, Network, Port  # noqa: E402


def build_sample_net(seed: int = 0) -> Network:
    """Input -> Convolution(weights, biases) -> ReLU -> {Pooling, Power} -> Concat."""
    rng = np.random.default_rng(seed)
    shape = (1, 3, 8, 8)
    feat = (1, 4, 8, 8)
    layers = [
        Layer(0, "data", "Input", outputs=[Port(0, shape)]),
        Layer(1, "conv1", "Convolution",
              data={"dilation-x": "1", "dilation-y": "1", "group": "1", "kernel-x": "3", "kernel-y": "3",
                    "output": "4", "pad-x": "1", "pad-y": "1", "stride-x": "1", "stride-y": "1"},
              inputs=[Port(0, shape)], outputs=[Port(3, feat)],
              blobs={"weights": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
                     "biases": rng.standard_normal(4).astype(np.float32)}),
        Layer(2, "relu1", "ReLU", inputs=[Port(0, feat)], outputs=[Port(1, feat)]),
        Layer(3, "pool1", "Pooling",
              data={"kernel-x": "1", "kernel-y": "1", "pool-method": "max", "stride-x": "1", "stride-y": "1"},
              inputs=[Port(0, feat)], outputs=[Port(1, feat)]),
        Layer(4, "scale1", "Power", data={"power": "1", "scale": "0.5", "shift": "0"},
              inputs=[Port(0, feat)], outputs=[Port(1, feat)]),
        Layer(5, "concat", "Concat", data={"axis": "1"},
              inputs=[Port(0, feat), Port(1, feat)], outputs=[Port(2, (1, 8, 8, 8))]),
    ]
    edges = [Edge(0, 0, 1, 0), Edge(1, 3, 2, 0), Edge(2, 1, 3, 0), Edge(2, 1, 4, 0),
             Edge(3, 1, 5, 0), Edge(4, 1, 5, 1)]
    return Network("sample", layers, edges, batch=1,
                   meta={"cli_parameters": "--input_model sample.caffemodel --data_type FP32"})


@pytest.fixture
def sample_net() -> Network:
    return build_sample_net()


@pytest.fixture
def make_net():
    """The builder itself, for tests that need several (e.g. differently seeded) nets."""
    return build_sample_net
