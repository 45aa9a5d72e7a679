"""Fixtures of the TensorFlow front-end tests.

Graphs and TensorFlow's reference outputs are made by REAL TensorFlow in a
subprocess (tests/tf/graphs.py, tests/tf/keras_apps.py run with this
interpreter, tests/tf/built_models.py): TensorFlow never loads into the pytest
process. The results are cached under $MO_CORE_HOME/test-cache/tf/, keyed by the
builder sources and the TensorFlow version, so a session builds them at most once
and later sessions reuse them. Converted IRs run on a real CPU daemon process in a
runtime directory of this session only.
"""
from __future__ import annotations

import os
import shutil

import pytest

from tests.daemon.conftest import _new_runtime_dir, cleanup_runtime
from tests.support import REPO
from tests.tf.built_models import Models, built


@pytest.fixture(scope="session")
def tf_graphs() -> Models:
    return Models(built("graphs"))


@pytest.fixture(scope="session")
def keras_apps() -> Models:
    return Models(built("keras_apps"))


@pytest.fixture(scope="session")
def ie():
    """IECore on a CPU daemon of this session (its own runtime directory)."""
    from device_daemons.client import IECore
    saved = {k: os.environ.get(k) for k in ("MO_CORE_RUNTIME_DIR", "PYTHONPATH")}
    runtime = _new_runtime_dir("tf-")
    os.environ["MO_CORE_RUNTIME_DIR"] = runtime
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, saved["PYTHONPATH"]) if p)
    core = IECore(policy="auto")
    yield core
    cleanup_runtime(runtime)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    shutil.rmtree(os.path.dirname(runtime), ignore_errors=True)
