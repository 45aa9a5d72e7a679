"""The model repository, laid out as Triton and OpenVINO Model Server lay it out:

    models/
      googlenet/
        config.json            (optional: config.py)
        1/model.xml, model.bin (an IR)
        2/deploy.prototxt, weights.caffemodel      (Caffe: converted on load)
      classifier/
        1/frozen.pb            (a frozen TensorFlow graph)  or  1/saved_model.pb + variables/

Version directories are positive integers; the newest is served unless the
config's "versions" says otherwise. A Caffe or TensorFlow model is converted with
`mo-core convert` (a subprocess: the server never imports a framework) into the
cache directory, keyed by a hash of the model's files and the conversion options,
so a restart or a replica on the same machine reuses the IR.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from core.errors import Error
from device_daemons.client import build_id

from .config import ModelConfig, read_config

log = logging.getLogger("mo_core.serve")

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
MAX_MODELS = 1000
CONVERT_TIMEOUT_S = float(os.environ.get("MO_CORE_SERVE_CONVERT_TIMEOUT", "1800"))


class UnknownModel(Error):
    """No such model directory in the repository."""


@dataclass(frozen=True)
class ModelSource:
    """One model of the repository: its directory, config and versions."""
    name: str
    path: str
    config: ModelConfig
    versions: tuple  # every version directory, ascending

    def served_versions(self) -> tuple:
        """The versions the config's policy serves."""
        policy = self.config.versions
        if policy == "latest":
            return self.versions[-1:]
        if policy == "all":
            return self.versions
        missing = [v for v in policy if v not in self.versions]
        if missing:
            raise Error("{}: 'versions' names {} but {} has only {}", self.config.source, missing, self.path,
                        list(self.versions) or "no version directories")
        return tuple(policy)


@dataclass(frozen=True)
class ModelFiles:
    """What one version directory holds: an IR, or a model to convert first."""
    kind: str  # "ir", "caffe", "tf", "saved_model"
    files: tuple  # the paths (IR: xml, bin; Caffe: prototxt, caffemodel; TF: pb; SavedModel: dir)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise Error("bad model name {!r}: letters, digits, '_', '.', '-' (not first), at most 128", name)
    return name


class ModelRepository:
    def __init__(self, path: str, cache_dir: str | None = None):
        self.path = os.path.abspath(path)
        if not os.path.isdir(self.path):
            raise Error("the model repository {} is not a directory", self.path)
        home = os.environ.get("MO_CORE_HOME", os.path.expanduser("~/.cache/mo-core"))
        self.cache_dir = os.path.abspath(cache_dir or os.path.join(home, "serve-cache"))

    def names(self) -> list[str]:
        """The model directories (hidden entries and plain files are not models)."""
        names = sorted(n for n in os.listdir(self.path)
                       if not n.startswith(".") and os.path.isdir(os.path.join(self.path, n)))
        if len(names) > MAX_MODELS:
            raise Error("the model repository {} has {} models; at most {} are served", self.path, len(names),
                        MAX_MODELS)
        return names

    def model(self, name: str) -> ModelSource:
        check_name(name)
        path = os.path.join(self.path, name)
        if not os.path.isdir(path):
            raise UnknownModel("no model {!r} in the repository {}", name, self.path)
        versions = sorted(int(v) for v in os.listdir(path)
                          if v.isdigit() and int(v) > 0 and os.path.isdir(os.path.join(path, v)))
        return ModelSource(name, path, read_config(path), tuple(versions))

    # ----------------------------------------------------------------- files
    def files(self, source: ModelSource, version: int) -> ModelFiles:
        d = os.path.join(source.path, str(version))
        entries = sorted(os.listdir(d))

        def only(suffix):
            found = [os.path.join(d, e) for e in entries if e.endswith(suffix) and os.path.isfile(os.path.join(d, e))]
            return found

        if os.path.isfile(os.path.join(d, "model.xml")):
            xml = os.path.join(d, "model.xml")
            return ModelFiles("ir", (xml, _bin_of(xml)))
        xmls = only(".xml")
        if len(xmls) == 1:
            return ModelFiles("ir", (xmls[0], _bin_of(xmls[0])))
        protos, weights = only(".prototxt"), only(".caffemodel")
        if protos and weights:
            proto = os.path.join(d, "deploy.prototxt") if os.path.join(d, "deploy.prototxt") in protos else protos[0]
            if len(weights) > 1 or (len(protos) > 1 and proto != os.path.join(d, "deploy.prototxt")):
                raise Error("{}: several Caffe models; keep one .prototxt (or deploy.prototxt) and one .caffemodel", d)
            return ModelFiles("caffe", (proto, weights[0]))
        if os.path.isfile(os.path.join(d, "saved_model.pb")):
            return ModelFiles("saved_model", (d,))
        saved = [os.path.join(d, e) for e in entries if os.path.isfile(os.path.join(d, e, "saved_model.pb"))]
        if len(saved) == 1:
            return ModelFiles("saved_model", (saved[0],))
        pbs = only(".pb")
        if len(pbs) == 1:
            return ModelFiles("tf", (pbs[0],))
        raise Error("{} holds no model: put model.xml + model.bin (an IR), a .prototxt + .caffemodel (Caffe), "
                    "a frozen .pb or a SavedModel (TensorFlow) there", d)

    def ir_of(self, source: ModelSource, version: int) -> tuple[str, str]:
        """(xml, bin) of a version: its IR, or the IR converted from its model
        (from the cache when it was converted before)."""
        found = self.files(source, version)
        if found.kind == "ir":
            return found.files
        key = _hash(found, source.config.convert_args, build_id())  # (another converter: converted again)
        out = os.path.join(self.cache_dir, f"{source.name}-{version}-{key}")
        xml, bin_ = os.path.join(out, "model.xml"), os.path.join(out, "model.bin")
        if os.path.isfile(xml) and os.path.isfile(bin_):
            log.info("model %s version %s: the IR converted before (%s)", source.name, version, out)
            return xml, bin_
        self._convert(source, version, found, out)
        return xml, bin_

    def _convert(self, source: ModelSource, version: int, found: ModelFiles, out: str) -> None:
        try:
            os.makedirs(self.cache_dir, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=".convert-", dir=self.cache_dir)
        except OSError as exc:  # a file there, read-only, full: this model cannot load, the others may
            raise Error("model {} version {}: the conversion cache {} cannot be used ({}); give --cache-dir a "
                        "writable directory", source.name, version, self.cache_dir, exc.strerror or exc) from None
        args = {"caffe": lambda f: ["--input_model", f[1], "--input_proto", f[0]],
                "tf": lambda f: ["--input_model", f[0]],
                "saved_model": lambda f: ["--saved_model_dir", f[0]]}[found.kind](found.files)
        cmd = [sys.executable, "-m", "cli", "convert", *args, "--output_dir", tmp, "--model_name", "model",
               *source.config.convert_args]
        log.info("model %s version %s: converting the %s model (%s) ...", source.name, version, found.kind,
                 " ".join(os.path.basename(f) for f in found.files))
        t0 = time.monotonic()
        env = dict(os.environ, PYTHONPATH=_repo_path())
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                stdin=subprocess.DEVNULL)
        timer = threading.Timer(CONVERT_TIMEOUT_S, proc.kill)  # a hung converter prints nothing to wake us
        timer.start()
        try:
            lines = []
            for line in proc.stdout:  # the converter's progress, as it comes
                line = line.rstrip()
                lines.append(line)
                if line:
                    log.info("model %s version %s: convert: %s", source.name, version, line)
            code = proc.wait()
            if not timer.is_alive() and code != 0:
                raise Error("model {} version {}: converting took longer than {} s (MO_CORE_SERVE_CONVERT_TIMEOUT)",
                            source.name, version, CONVERT_TIMEOUT_S)
            if code != 0:
                errors = [ln for ln in lines if "[ ERROR ]" in ln] or lines[-5:]
                raise Error("model {} version {}: converting {} failed (mo-core convert exit {}): {}", source.name,
                            version, found.files[0], code, " ".join(e.strip() for e in errors)[:2000])
            try:
                os.rename(tmp, out)
            except OSError as exc:  # another process converted it at the same time: theirs is as good
                if not os.path.isfile(os.path.join(out, "model.xml")):
                    raise Error("model {} version {}: cannot store the converted IR in {} ({})", source.name,
                                version, out, exc.strerror or exc) from None
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            shutil.rmtree(tmp, ignore_errors=True)
        log.info("model %s version %s: converted in %.1f s (%s)", source.name, version, time.monotonic() - t0, out)


def _bin_of(xml: str) -> str:
    path = os.path.splitext(xml)[0] + ".bin"
    if not os.path.isfile(path):
        raise Error("{} has no weights file {} beside it", xml, os.path.basename(path))
    return path


def _hash(found: ModelFiles, convert_args: tuple, build: str) -> str:
    h = hashlib.sha256(repr((found.kind, convert_args, build)).encode())
    for top in found.files:
        paths = [top] if os.path.isfile(top) else sorted(
            os.path.join(r, f) for r, _, fs in os.walk(top) for f in fs)
        for path in paths:
            h.update(os.path.relpath(path, os.path.dirname(top)).encode() + b"\0")
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()[:16]


def _repo_path() -> str:
    """This checkout (the converter must be the same mo-core as the server)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
