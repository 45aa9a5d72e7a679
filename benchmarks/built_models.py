"""TensorFlow models made by builder scripts (tests/tf: graphs.py, keras_apps.py, ...;
tests/tf_worker/offload_graphs.py), built once by REAL TensorFlow in a subprocess and
cached under $MO_CORE_HOME/test-cache/tf/<builder>-<hash>/ (keyed by the builder
sources and the TensorFlow version). Used by the benchmarks (Keras applications,
offload graphs) and the tests; this module itself never imports TensorFlow, and the
builders run as scripts, never imported here."""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TF_BUILDERS = os.path.join(REPO, "tests", "tf")   # the builders and their helper tf_build.py
MO_HOME = os.environ.get("MO_CORE_HOME", os.path.expanduser("~/.cache/mo-core"))
CACHE = os.path.join(MO_HOME, "test-cache", "tf")


def tensorflow_version() -> str:
    try:
        return importlib.metadata.version("tensorflow-cpu")
    except importlib.metadata.PackageNotFoundError:
        try:
            return importlib.metadata.version("tensorflow")
        except importlib.metadata.PackageNotFoundError:
            raise AssertionError("TensorFlow is not installed in {}: building the TF test models needs it (run "
                                 "./run test, which installs it)".format(sys.prefix)) from None


def built(builder: str, timeout: float = 1800, directory: str = TF_BUILDERS) -> str:
    """The output directory of <directory>/<builder>.py (default tests/tf/), built once
    and cached. Builders elsewhere import tf_build from tests/tf."""
    digest = hashlib.sha256()
    for path in (os.path.join(directory, builder + ".py"), os.path.join(TF_BUILDERS, "tf_build.py")):
        with open(path, "rb") as f:
            digest.update(f.read())
    digest.update(tensorflow_version().encode())
    final = os.path.join(CACHE, "{}-{}".format(builder, digest.hexdigest()[:16]))
    if os.path.isfile(os.path.join(final, "index.json")):
        return final
    os.makedirs(CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix=builder + "-", dir=CACHE)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, os.path.join(directory, builder + ".py"), work], capture_output=True,
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
