"""Fixtures of the sub-graph replacement tests: Caffe nets the tests write and
real pycaffe fills with weights, and a real CPU daemon process of this session
(its own runtime directory) to run the converted IRs."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.daemon.conftest import _new_runtime_dir, cleanup_runtime
from tests.support import REPO

HERE = os.path.dirname(os.path.abspath(__file__))
EXT = os.path.join(HERE, "ext")


@pytest.fixture(scope="session")
def ie():
    """IECore on a CPU daemon of this session."""
    from device_daemons.client import IECore
    saved = {k: os.environ.get(k) for k in ("MO_CORE_RUNTIME_DIR", "PYTHONPATH")}
    runtime = _new_runtime_dir("sg-")
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
