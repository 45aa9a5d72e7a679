"""Fixtures of the TF worker tests: graphs built by REAL TensorFlow in a subprocess
(tests/tf_worker/offload_graphs.py, cached like tests/tf's), a CPU daemon of this session
(the `ie` fixture of tests/tf), the Keras applications of tests/tf."""
from __future__ import annotations

import os

import pytest

from tests.tf import conftest as tf_fixtures
from benchmarks.built_models import Models, built

ie = tf_fixtures.ie                    # a CPU daemon of this session (private runtime directory)
keras_apps = tf_fixtures.keras_apps    # tests/tf's Keras applications

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def offload_graphs() -> Models:
    return Models(built("offload_graphs", directory=HERE))
