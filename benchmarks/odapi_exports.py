"""OD API exports for the tests and benchmarks, built by tests/tf/odapi/build_exports.py
with the OD API's own code in its venv (scripts/odapi_venv.sh) and cached under
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

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(REPO, "tests", "tf", "odapi")   # the builder script and its pipeline configs
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
                             work] + models, stdout=log, stderr=subprocess.STDOUT, env=env)
    return final, work, proc


def _stop(runs: dict):
    """Ends every build still running and removes its work directory (no build goes on behind a failure)."""
    for _, work, proc in runs.values():
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            shutil.rmtree(work, ignore_errors=True)


def built(codebases=("2.8", "2019"), timeout: float = 2400) -> dict[str, Exports]:
    """{codebase: Exports}, building what the cache lacks (code bases in parallel)."""
    started = time.monotonic()
    runs = {c: _start(c, sorted(MODELS)) for c in codebases}
    try:
        for codebase, (final, work, proc) in runs.items():
            if proc is None:
                continue
            try:
                proc.wait(timeout=max(1.0, timeout - (time.monotonic() - started)))
            except subprocess.TimeoutExpired:
                raise AssertionError("building the OD API exports ({}) took more than {} s".format(codebase, timeout))
            if proc.returncode != 0:
                with open(os.path.join(work, "build.log")) as f:
                    raise AssertionError("building the OD API exports ({}) failed:\n{}".format(codebase,
                                                                                          f.read()[-4000:]))
            reports = {}
            for model in MODELS:
                with open(os.path.join(work, model, "report.json")) as f:
                    reports[model] = json.load(f)
            with open(os.path.join(work, "index.json"), "w") as f:
                json.dump(reports, f, indent=1)
            try:
                os.rename(work, final)
            except OSError:  # built meanwhile by another session
                shutil.rmtree(work, ignore_errors=True)
            runs[codebase] = (final, None, None)
    except BaseException:  # a failure, a timeout, Ctrl-C: no orphan build
        _stop(runs)
        raise
    return {c: Exports(final, c) for c, (final, _, _) in runs.items()}


# --- pairing detections: TensorFlow's (y-first) and a DetectionOutput's rows (x-first, normalized) ---
THRESHOLD = 0.3
SCORE_TOL = 1e-3
BOX_TOL = 1e-3     # of the image size: boxes are normalized


def tf_detections(out) -> list[tuple]:
    """[(class, score, xmin, ymin, xmax, ymax)] of a TensorFlow export's outputs."""
    n = int(out["num_detections"][0])
    boxes, scores, classes = out["detection_boxes"][0], out["detection_scores"][0], out["detection_classes"][0]
    return [(int(classes[i]), float(scores[i]), *map(float, boxes[i][[1, 0, 3, 2]])) for i in range(n)]


def ir_detections(rows: np.ndarray) -> list[tuple]:
    rows = np.asarray(rows).reshape(-1, 7)
    end = np.flatnonzero(rows[:, 0] < 0)  # the end marker: zeros after it
    rows = rows[:end[0] if end.size else len(rows)]
    return [(int(r[1]), float(r[2]), *map(float, r[3:])) for r in rows]


def unpaired(ours: list[tuple], theirs: list[tuple]) -> list[str]:
    """Every detection above THRESHOLD on either side paired with one of the other side
    (same class, score within SCORE_TOL, each box coordinate within BOX_TOL); the problems."""
    problems = []
    for side, left, right in (("TensorFlow", theirs, ours), ("mo-core", ours, theirs)):
        used = set()
        for det in sorted(left, key=lambda d: -d[1]):
            if det[1] <= THRESHOLD:
                continue
            match = next((j for j, other in enumerate(right) if j not in used and other[0] == det[0]
                          and abs(other[1] - det[1]) <= SCORE_TOL
                          and max(abs(a - b) for a, b in zip(other[2:], det[2:])) <= BOX_TOL), None)
            if match is None:
                problems.append("{} detection {} has no pair".format(side, tuple(round(v, 5) for v in det)))
            else:
                used.add(match)
    return problems
