"""Session fixtures: caffemodels of the Caffe sdist's real deploy nets, made once
per test session with real pycaffe (He-scaled random weights, so that outputs
depend on the input and comparisons with pycaffe mean something)."""
import os

import pytest

from tests.support import BVLC, REPO, make_caffemodel, sdist_prototxt


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
