"""Fixtures of the TF worker tests: graphs built by REAL TensorFlow in a subprocess
(tests/tf_worker/offload_graphs.py, cached like tests/tf's), a CPU daemon of this session
(the `ie` fixture of tests/tf), the Keras applications of tests/tf."""
from __future__ import annotations

import os

import pytest

from tests.tf.built_models import Models, built
from tests.tf.conftest import ie, keras_apps  # noqa: F401  (shared session fixtures)

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def offload_graphs() -> Models:
    return Models(built("offload_graphs", directory=HERE))
