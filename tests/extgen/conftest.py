"""Fixtures of the extgen tests: a CPU daemon of this session (own runtime directory),
the OpenCL device, and the silent-mode configuration of the HardSigmoid example."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.replacement.caffe_nets import HEAD, TAIL
from tests.support import REPO, caffe_outputs, make_caffemodel, write_text

EXAMPLE = os.path.join(REPO, "cli", "config.extgen.json.example")


HARD_SIGMOID = (HEAD.format(name="hard_sigmoid")
                + 'layer { name: "hsig" type: "HardSigmoid" bottom: "conv1" top: "hsig"\n'
                  '  hardsigmoid_param { alpha: 0.3 beta: 0.4 } }\n'
                + TAIL.format(bottom="hsig"))
CPU_BODY = "outputs = [np.clip(self.alpha * inputs[0] + self.beta, 0.0, 1.0)]"
CL_BODY = "output[out_id] = clamp((float)ALPHA * input0[in_id] + (float)BETA, 0.0f, 1.0f);"


@pytest.fixture(scope="session")
def model(tmp_path_factory):
    """(prototxt, caffemodel, x.npy path, x, the pycaffe net forwarded on x) of conv1 -> HardSigmoid -> conv2."""
    d = tmp_path_factory.mktemp("hard_sigmoid")
    proto = write_text(str(d / "hsig.prototxt"), HARD_SIGMOID)
    weights = str(d / "hsig.caffemodel")
    make_caffemodel(proto, weights, seed=9, scale=0.4)
    x = np.random.default_rng(4).standard_normal((2, 3, 10, 10)).astype(np.float32) * 2
    np.save(str(d / "x.npy"), x)
    reference = caffe_outputs(proto, weights, {"data": x})
    return proto, weights, str(d / "x.npy"), x, reference


@pytest.fixture(scope="session")
def ie():
    from tests.daemon.conftest import private_iecore
    with private_iecore("eg-") as core:
        yield core


@pytest.fixture(scope="session")
def gpu_device():
    from device_daemons.gpu import open_device
    return open_device("GPU")


def example_config(**changes) -> dict:
    """The shipped config.extgen.json.example (a Caffe HardSigmoid layer) with changes."""
    with open(EXAMPLE) as f:
        config = json.load(f)
    config.update(changes)
    return config
