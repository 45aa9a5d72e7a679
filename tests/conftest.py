"""Session fixtures: caffemodels of the Caffe sdist's real deploy nets, made once
per test session with He-scaled random weights (so that outputs depend on the
input and comparisons mean something): by real pycaffe (`bvlc_models`, for the
comparisons against it) or with our own protos and no framework (`own_models`,
for the converter's tests that run in `tox -e core`)."""
import os

import pytest

from tests import caffe_models
from tests.support import BVLC, REPO, make_caffemodel, sdist_prototxt


def _sdist_models(out, make) -> dict:
    models = {}
    for i, name in enumerate(BVLC):
        proto = sdist_prototxt(name)
        weights = os.path.join(out, name + ".caffemodel")
        make(proto, weights, seed=i, scale=None)
        models[name] = (proto, weights)
    return models


@pytest.fixture(scope="session")
def bvlc_models(tmp_path_factory):
    """{name: (prototxt, caffemodel)} for bvlc_alexnet, bvlc_googlenet, bvlc_reference_caffenet."""
    return _sdist_models(tmp_path_factory.mktemp("bvlc"), make_caffemodel)


@pytest.fixture(scope="session")
def own_models(tmp_path_factory):
    """{name: (prototxt, caffemodel)} of the same nets, made without pycaffe (tests/caffe_models.py)."""
    return _sdist_models(tmp_path_factory.mktemp("own"), caffe_models.make_caffemodel)


@pytest.fixture(scope="session")
def small_nets(tmp_path_factory):
    """{name: (prototxt, caffemodel)} for the converter issue's SSD-style net and
    Conv-BatchNorm-Scale net (tests/convert/nets)."""
    d = tmp_path_factory.mktemp("small")
    nets = os.path.join(REPO, "tests", "convert", "nets")
    ssd = os.path.join(nets, "ssd_small.prototxt")
    fuse = os.path.join(nets, "conv_bn_scale.prototxt")
    make_caffemodel(ssd, str(d / "ssd.caffemodel"), scale=None)
    make_caffemodel(fuse, str(d / "fuse.caffemodel"), scale=0.3, positive=("conv1_bn", "conv1_scale", "fc_bn"))
    return {"ssd_small": (ssd, str(d / "ssd.caffemodel")), "conv_bn_scale": (fuse, str(d / "fuse.caffemodel"))}
