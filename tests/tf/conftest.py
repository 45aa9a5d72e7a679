"""Fixtures of the TensorFlow front-end tests.

Graphs and TensorFlow's reference outputs are made by REAL TensorFlow in a
subprocess (tests/tf/graphs.py, tests/tf/keras_apps.py run with this
interpreter, benchmarks/built_models.py): TensorFlow never loads into the pytest
process. The results are cached under $MO_CORE_HOME/test-cache/tf/, keyed by the
builder sources and the TensorFlow version, so a session builds them at most once
and later sessions reuse them. Converted IRs run on a real CPU daemon process in a
runtime directory of this session only.
"""
from __future__ import annotations


import pytest

from benchmarks.built_models import Models, built


@pytest.fixture(scope="session")
def tf_graphs() -> Models:
    return Models(built("graphs"))


@pytest.fixture(scope="session")
def keras_apps() -> Models:
    return Models(built("keras_apps"))


@pytest.fixture(scope="session")
def ie():
    """IECore on a CPU daemon of this session (its own runtime directory)."""
    from tests.daemon.conftest import private_iecore
    with private_iecore("tf-") as core:
        yield core
