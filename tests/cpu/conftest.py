"""Session fixtures of the CPU plugin tests: the Caffe sdist's bvlc deploy nets
with random weights, made once per session with real pycaffe."""
from __future__ import annotations

import pytest

from tests.support import import_caffe


@pytest.fixture(scope="session")
def cpu_bvlc(bvlc_models):
    """{name: (prototxt, caffemodel, caffe.Net loaded from them)} (tests/conftest.py makes the models)."""
    caffe = import_caffe()
    cache = {}

    def get(name):
        if name not in cache:
            proto, weights = bvlc_models[name]
            cache[name] = (proto, weights, caffe.Net(proto, weights, caffe.TEST))
        return cache[name]
    return get


@pytest.fixture(params=["onednn", "numpy"])
def cpu_backend(request, monkeypatch):
    """Runs a test once per CPU backend (plans made in it read MO_CORE_CPU_BACKEND):
    "onednn" fails when oneDNN cannot be loaded, it never falls back silently."""
    monkeypatch.setenv("MO_CORE_CPU_BACKEND", request.param)
    return request.param
