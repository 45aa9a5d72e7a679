"""Session fixtures: caffemodels of the Caffe sdist's real deploy nets, made once
per test session with real pycaffe (He-scaled random weights, so that outputs
depend on the input and comparisons with pycaffe mean something)."""
import os

import pytest

from tests.support import BVLC, make_caffemodel, sdist_prototxt


@pytest.fixture(scope="session")
def bvlc_models(tmp_path_factory):
    """{name: (prototxt, caffemodel)} for bvlc_alexnet, bvlc_googlenet, bvlc_reference_caffenet."""
    out = tmp_path_factory.mktemp("bvlc")
    models = {}
    for i, name in enumerate(BVLC):
        proto = sdist_prototxt(name)
        weights = os.path.join(out, name + ".caffemodel")
        make_caffemodel(proto, weights, seed=i, scale=None)
        models[name] = (proto, weights)
    return models
