"""Session fixtures of the CPU plugin tests: the Caffe sdist's bvlc deploy nets
with random weights, made once per session with real pycaffe."""
from __future__ import annotations

import os

import numpy as np
import pytest

from tests.cpu.cpu_helpers import BVLC, import_caffe, sdist_prototxt


def fill_scaled(net, rng):
    """Weights N(0, 2/fan_in) (He), biases N(0, 0.01^2): activations keep their scale
    through the whole net, so every output depends on the input. (Plain N(0, 0.01^2)
    weights make GoogLeNet's classifier input-independent to 1e-7: the biases win.)"""
    for blobs in net.params.values():
        weights = blobs[0].data
        fan_in = int(np.prod(weights.shape[1:])) or 1
        weights[...] = rng.standard_normal(weights.shape) * np.sqrt(2.0 / fan_in)
        for blob in blobs[1:]:
            blob.data[...] = rng.standard_normal(blob.data.shape) * 0.01


@pytest.fixture(scope="session")
def cpu_bvlc(tmp_path_factory):
    """{name: (prototxt, caffemodel, caffe.Net loaded from them)}, made on first use."""
    caffe = import_caffe()
    out = tmp_path_factory.mktemp("cpu_bvlc")
    cache = {}

    def get(name):
        if name not in cache:
            proto = sdist_prototxt(name)
            net = caffe.Net(proto, caffe.TEST)
            fill_scaled(net, np.random.default_rng(BVLC.index(name)))
            weights = os.path.join(str(out), name + ".caffemodel")
            net.save(weights)
            cache[name] = (proto, weights, caffe.Net(proto, weights, caffe.TEST))
        return cache[name]
    return get
