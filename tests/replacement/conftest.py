"""Fixtures of the sub-graph replacement tests: Caffe nets the tests write and real
pycaffe fills with weights, TensorFlow graphs built by real TensorFlow in a
subprocess and cached (tests/replacement/tf_graphs.py, as tests/tf does), and a real
CPU daemon process of this session (its own runtime directory) to run the IRs."""
from __future__ import annotations

import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXT = os.path.join(HERE, "ext")


@pytest.fixture(scope="session")
def ie():
    """IECore on a CPU daemon of this session."""
    from tests.daemon.conftest import private_iecore
    with private_iecore("sg-") as core:
        yield core


@pytest.fixture(scope="session")
def tf_graphs():
    from benchmarks.built_models import Models, built
    return Models(built("tf_graphs", directory=HERE))
