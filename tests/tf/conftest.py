"""Fixtures of the TensorFlow front-end tests.

Graphs and TensorFlow's reference outputs are made by REAL TensorFlow in a
subprocess (tests/tf/graphs.py, tests/tf/keras_apps.py run with this
interpreter): TensorFlow never loads into the pytest process. The results are
cached under $MO_CORE_HOME/test-cache/tf/<builder>-<hash>/, keyed by the builder
sources and the TensorFlow version, so a session builds them at most once and
later sessions reuse them. Converted IRs run on a real CPU daemon process in a
runtime directory of this session only.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from tests.daemon.conftest import _new_runtime_dir, cleanup_runtime
from tests.support import MO_HOME, REPO

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(MO_HOME, "test-cache", "tf")


def _tensorflow_version() -> str:
    try:
        return importlib.metadata.version("tensorflow")
    except importlib.metadata.PackageNotFoundError:
        try:
            return importlib.metadata.version("tensorflow-cpu")
        except importlib.metadata.PackageNotFoundError:
            raise AssertionError("TensorFlow is not installed in {}: the TF tests need it to build their "
                                 "models (run ./run test, which installs it)".format(sys.prefix)) from None


def built(builder: str, timeout: float = 1800) -> str:
    """The output directory of tests/tf/<builder>.py, built once and cached."""
    digest = hashlib.sha256()
    for name in (builder + ".py", "tf_build.py"):
        with open(os.path.join(HERE, name), "rb") as f:
            digest.update(f.read())
    digest.update(_tensorflow_version().encode())
    final = os.path.join(CACHE, "{}-{}".format(builder, digest.hexdigest()[:16]))
    if os.path.isfile(os.path.join(final, "index.json")):
        return final
    os.makedirs(CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix=builder + "-", dir=CACHE)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, os.path.join(HERE, builder + ".py"), work], capture_output=True,
                          text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise AssertionError("building the TensorFlow test models with {} failed:\n{}".format(
            builder, proc.stderr[-4000:]))
    try:
        os.rename(work, final)
    except OSError:  # built meanwhile by another session
        shutil.rmtree(work, ignore_errors=True)
    return final


class Models:
    """A built directory: .pb files, TensorFlow's outputs, index.json."""

    def __init__(self, directory: str):
        self.dir = directory
        with open(os.path.join(directory, "index.json")) as f:
            self.index = json.load(f)

    def path(self, name: str) -> str:
        return os.path.join(self.dir, self.index[name]["model"])

    def meta(self, name: str) -> dict:
        return self.index[name]

    def arrays(self, name: str):
        import numpy as np
        return np.load(os.path.join(self.dir, name + ".npz"))


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
