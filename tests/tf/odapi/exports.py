"""OD API exports for the tests and benchmarks, built by build_exports.py with the
OD API's own code in its venv (scripts/odapi_venv.sh) and cached under
$MO_CORE_HOME/test-cache/odapi/<codebase>-<hash>/, keyed by the build script, the
pipeline configs and the OD API venv's package versions: the first session pays
the build (all models of a code base in one subprocess, the two code bases side by
side), later ones take a directory listing. This module never imports TensorFlow.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MO_HOME = os.environ.get("MO_CORE_HOME", os.path.expanduser("~/.cache/mo-core"))
CACHE = os.path.join(MO_HOME, "test-cache", "odapi")
VENV_PYTHON = os.path.join(MO_HOME, "odapi-venv", "bin", "python")
CODEBASE_PATH = {"2.8": None, "2019": os.path.join(MO_HOME, "odapi-2019")}
MODELS = json.load(open(os.path.join(HERE, "configs", "models.json")))


def _packages(python: str) -> list[str]:
    site = os.path.join(os.path.dirname(os.path.dirname(python)), "lib")
    names = []
    for root, dirs, _ in os.walk(site):
        names += [d for d in dirs if d.endswith(".dist-info")]
        if root.count(os.sep) - site.count(os.sep) >= 2:
            dirs[:] = []
    return sorted(names)


def key(codebase: str) -> str:
    digest = hashlib.sha256()
    for name in sorted(os.listdir(os.path.join(HERE, "configs"))) + ["../build_exports.py"]:
        with open(os.path.join(HERE, "configs", name), "rb") as f:
            digest.update(name.encode() + f.read())
    digest.update(codebase.encode())
    if not os.path.exists(VENV_PYTHON):
        raise AssertionError("The OD API venv is missing ({}): run scripts/odapi_venv.sh (./run test does).".format(
            VENV_PYTHON))
    digest.update("\n".join(_packages(VENV_PYTHON)).encode())
    if CODEBASE_PATH[codebase]:
        digest.update("\n".join(sorted(os.listdir(CODEBASE_PATH[codebase]))).encode())
    return "{}-{}".format(codebase, digest.hexdigest()[:16])


class Exports:
    """A built directory: <model>/export/{frozen_inference_graph.pb,pipeline.config}, <model>/tf_out.npz."""

    def __init__(self, directory: str, codebase: str):
        self.dir, self.codebase = directory, codebase
        with open(os.path.join(directory, "index.json")) as f:
            self.index = json.load(f)

    def graph(self, model: str) -> str:
        return os.path.join(self.dir, model, "export", "frozen_inference_graph.pb")

    def pipeline(self, model: str) -> str:
        return os.path.join(self.dir, model, "export", "pipeline.config")

    def tf_out(self, model: str):
        import numpy as np
        return np.load(os.path.join(self.dir, model, "tf_out.npz"))


def _start(codebase: str, models: list[str]):
    final = os.path.join(CACHE, key(codebase))
    if os.path.isfile(os.path.join(final, "index.json")):
        return final, None, None
    os.makedirs(CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix="building-{}-".format(codebase), dir=CACHE)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONPATH", None)
    if CODEBASE_PATH[codebase]:
        env["PYTHONPATH"] = CODEBASE_PATH[codebase]
    log = open(os.path.join(work, "build.log"), "w")
    proc = subprocess.Popen([VENV_PYTHON, os.path.join(HERE, "build_exports.py"), "--codebase", codebase, "--out",
                             work] + models, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    return final, work, proc


def built(codebases=("2.8", "2019"), timeout: float = 1800) -> dict[str, Exports]:
    """{codebase: Exports}, building what the cache lacks (code bases in parallel)."""
    started = time.monotonic()
    runs = {c: _start(c, sorted(MODELS)) for c in codebases}
    for codebase, (final, work, proc) in runs.items():
        if proc is None:
            continue
        try:
            out, _ = proc.communicate(timeout=max(1.0, timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out = ""
        if proc.returncode != 0:
            with open(os.path.join(work, "build.log")) as f:
                tail = f.read()[-4000:]
            for _, other_work, other in runs.values():  # no build goes on behind a failed one
                if other is not None:
                    if other.poll() is None:
                        other.kill()
                        other.communicate()
                    shutil.rmtree(other_work, ignore_errors=True)
            raise AssertionError("building the OD API exports ({}) failed:\n{}".format(codebase, tail))
        reports = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        with open(os.path.join(work, "index.json"), "w") as f:
            json.dump({r["model"]: r for r in reports}, f, indent=1)
        try:
            os.rename(work, final)
        except OSError:  # built meanwhile by another session
            shutil.rmtree(work, ignore_errors=True)
    return {c: Exports(final, c) for c, (final, _, _) in runs.items()}
