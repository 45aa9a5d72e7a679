"""Kernel variants chosen per device: a short timed search at first load, cached.

A tunable kernel (kernels/base.py's Tunable: Convolution, FullyConnected) lists
its configurations for the current shapes, best guess first (kernels/tiles.py).
MO_CORE_GPU_TUNE says how the plan picks one:

* 0: the first (a heuristic on the problem's size and the device's compute units);
* 1: a handful per distinct problem, each run on the device (one run to warm up,
  then REPEATS timed by OpenCL profiling events, the median kept);
* full: every valid tile of a wider grid (minutes for a big network).

Unset: 1 on GPUs, 0 on CPU OpenCL devices (PoCL: compiling a variant takes
seconds there and its "simd" kernels have a single configuration anyway).
A search is bounded: BUDGET_S per plan (MO_CORE_GPU_TUNE_S overrides it; later
problems take the heuristic, not cached, so a later load goes on), a candidate
whose warm-up run is 20x slower than the best so far is not repeated.
MO_CORE_GPU_SKIP (comma-separated families: tiled, vec, mma, v4, wino,
wino_mma, wino4, gemv, block, direct) leaves families out of the search, and such a
search is not cached: a device check's A/B of one family in one run.
A configuration that relies on device-specific code (Tunable.verify: the
tensor-core GEMM's PTX) is timed after the trusted ones, into outputs filled
with NaN first, and its results must agree with the first trusted one's on the
same inputs (_agree) before its time counts; one that does not is skipped with
a warning.

Results are cached in $MO_CORE_HOME/gpu-tune/<device>.json, keyed by problem
(layer family, shapes, attributes, precision, style): identical layers of one
network are searched once, and so is a network loaded again. The file records
the device name, platform, driver version and a hash of the kernel sources:
any of them changed (a new driver, new kernels) and its entries are discarded
(as CLBlast's and clDNN's tuning caches are keyed). A file that cannot be read
or parsed is ignored with a warning and replaced by the next search.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import statistics
import tempfile
import time

import numpy as np
import pyopencl as cl

from ir import IRError

from .kernels.base import ConfigRejected
from .programs import KERNEL_DIR, BuildError

ENV_TUNE = "MO_CORE_GPU_TUNE"
ENV_BUDGET = "MO_CORE_GPU_TUNE_S"
ENV_SKIP = "MO_CORE_GPU_SKIP"  # kernel families the search leaves out (a device check's A/B of one family)
FAMILIES = ("tiled", "vec", "mma", "v4", "wino", "wino_mma", "wino4", "gemv", "block", "direct")
MODES = ("0", "1", "full")
BUDGET_S = {"1": 90.0, "full": 900.0}
REPEATS = {"1": 3, "full": 5}
FORMAT = 1
MAX_FILE_BYTES = 16 << 20  # a cache file larger than this is not read
SLOW = 20.0                # a candidate this much slower than the best is not repeated


def _home() -> str:
    return os.environ.get("MO_CORE_HOME", os.path.expanduser("~/.cache/mo-core"))


def tune_mode(device, mode: str | None = None) -> str:
    """"0", "1" or "full": `mode`, else MO_CORE_GPU_TUNE, else by device type."""
    text = (mode if mode is not None else os.environ.get(ENV_TUNE, "")).strip().lower()
    if not text:
        return "1" if device.is_gpu else "0"
    if text not in MODES:
        raise IRError(f"{ENV_TUNE}={text!r} is not one of 0 (heuristic kernel choice), 1 (a short search per layer "
                      "shape, cached) or full (a wide search, cached)")
    return text


def family(config: dict) -> str:
    """The family of a configuration that MO_CORE_GPU_SKIP names: its kernel, or
    "vec" / "v4" for the load variants of the tiled and tensor-core GEMMs (a
    Winograd configuration is of its Winograd family whatever its GEMM reads)."""
    kernel = str(config.get("kernel"))
    return "vec" if kernel == "tiled" and config.get("vec") else "v4" if kernel == "mma" and config.get("v4") \
        else kernel


def skipped_families() -> frozenset:
    names = frozenset(v.strip().lower() for v in os.environ.get(ENV_SKIP, "").split(",") if v.strip())
    unknown = sorted(names - set(FAMILIES))
    if unknown:
        raise IRError(f"{ENV_SKIP} names {', '.join(unknown)}: kernel families are {', '.join(FAMILIES)}")
    return names


def _env_budget(default: float) -> float:
    text = os.environ.get(ENV_BUDGET, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise IRError(f"{ENV_BUDGET}={text!r} is not a number of seconds (the longest a plan's kernel search may "
                      "take)")
    return value


@functools.lru_cache(maxsize=None)
def source_hash() -> str:
    """A hash of every kernel source and of the configuration lists: what a cached
    choice depends on besides the device."""
    digest = hashlib.sha256()
    kernel_dir = KERNEL_DIR
    for name in sorted(os.listdir(kernel_dir)):
        if name.endswith(".cl") or name == "tiles.py":
            with open(os.path.join(kernel_dir, name), "rb") as f:
                digest.update(name.encode() + b"\0" + f.read())
    return digest.hexdigest()[:16]


def _valid_entry(entry) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
        return False
    config = entry["config"]
    return isinstance(config.get("kernel"), str) and len(config) <= 16 and \
        all(isinstance(k, str) and (isinstance(v, (int, str)) and not isinstance(v, bool)) for k, v in config.items())


class TuneCache:
    """The tuning results of one device (see the module doc)."""

    def __init__(self, device, directory: str | None = None):
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", device.name).strip("_")[:80] or "device"
        self.path = os.path.join(directory or os.path.join(_home(), "gpu-tune"), safe + ".json")
        self.identity = {"device": device.name, "platform": device.platform, "driver": device.driver,
                         "version": device.version, "source": source_hash()}
        self.warnings: list[str] = []
        self.entries = self._read(warn=True)

    def _read(self, warn: bool) -> dict:
        """The entries of the file that are for this identity ({} if none)."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            return self._bad(f"cannot be read ({exc})", warn)
        if len(raw) > MAX_FILE_BYTES:
            return self._bad(f"is larger than {MAX_FILE_BYTES >> 20} MB", warn)
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # (RecursionError: nested too deeply)
            return self._bad(f"is not valid JSON ({exc})", warn)
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict) \
                or not isinstance(data.get("identity"), dict):
            return self._bad("is not a tuning cache of this version", warn)
        if data["identity"] != self.identity:
            return {}  # another driver, kernel source or device: its choices do not apply
        return {k: v for k, v in data["entries"].items() if isinstance(k, str) and _valid_entry(v)}

    def _bad(self, why: str, warn: bool) -> dict:
        if warn:
            self.warnings.append(f"the GPU tuning cache {self.path} {why}: ignored (the kernels are searched "
                                 "again and the file rewritten)")
        return {}

    def get(self, key: str) -> dict | None:
        entry = self.entries.get(key)
        return dict(entry["config"]) if entry else None

    def put(self, key: str, config: dict, us: float):
        """Records a choice and writes the file (merged with what other processes
        wrote meanwhile; a write that fails leaves the choice in memory only)."""
        self.entries[key] = {"config": dict(config), "us": round(float(us), 2)}
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, exist_ok=True)
            with self._locked(directory):
                merged = self._read(warn=False)
                merged.update(self.entries)
                self.entries = merged
                fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tune-", suffix=".json")
                with os.fdopen(fd, "w") as f:
                    json.dump({"format": FORMAT, "identity": self.identity, "entries": merged}, f, indent=0,
                              sort_keys=True)
                os.replace(tmp, self.path)
        except OSError as exc:
            message = f"the GPU tuning cache {self.path} cannot be written ({exc}): choices are not kept"
            if message not in self.warnings:
                self.warnings.append(message)

    @contextlib.contextmanager
    def _locked(self, directory):
        with open(os.path.join(directory, ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _agree(outputs, reference) -> bool:
    """Results of two kernel configurations on the same inputs: equal up to the
    storage type's rounding and the order of summation (a wrong kernel is off by
    the values' own size)."""
    for got, want in zip(outputs, reference):
        if not np.array_equal(np.isnan(got), np.isnan(want)):
            return False
        finite = ~np.isnan(want)
        scale = float(np.max(np.abs(want[finite]), initial=0.0))
        if np.max(np.abs(got[finite] - want[finite]), initial=0.0) > 2e-2 * scale + 1e-3:
            return False
    return True


class Tuner:
    """Picks each tunable kernel's configuration for a plan (see the module doc).
    pinned: a configuration every kernel that can run it uses (tests, `mo-core
    tune --show`); the others choose as usual."""

    def __init__(self, device, mode: str | None = None, cache: TuneCache | None = None, pinned: dict | None = None,
                 budget_s: float | None = None):
        self.device = device
        self.mode = tune_mode(device, mode)
        self.cache = cache if cache is not None else (TuneCache(device) if self.mode != "0" else None)
        self.pinned = dict(pinned) if pinned else None
        self.skip = skipped_families()
        self.budget_s = budget_s if budget_s is not None else _env_budget(BUDGET_S.get(self.mode, 0.0))
        self.spent_s = 0.0       # seconds spent searching (builds and timed runs)
        self.searched = 0        # problems searched
        self.report: list[dict] = []  # one row per kernel: layer, key, config, how, us
        self._queue = None
        self._buffers: dict = {}
        self._failures: list[str] = []

    @property
    def warnings(self) -> list[str]:
        return (list(self.cache.warnings) if self.cache is not None else []) + self._failures

    def choose(self, kernel, precision: str):
        """Applies a configuration to `kernel` (its shapes configured)."""
        how, us = "heuristic", None
        key = f"{precision}:{kernel.ctx.style}:{kernel.tune_key()}"
        candidates = kernel.configs("default" if self.mode == "0" else self.mode)
        if self.skip:  # (never all of them: a layer keeps a kernel)
            candidates = [c for c in candidates if family(c) not in self.skip] or candidates
        if self.pinned is not None and self._try(kernel, self.pinned):
            how = "pinned"
        elif self.mode == "0":
            self._first(kernel, candidates)
        elif len(candidates) == 1 and self._try(kernel, candidates[0]):
            how = "only"
        else:
            cached = self.cache.get(key)
            if cached is not None and family(cached) not in self.skip and self._try(kernel, cached):
                how, us = "cached", self.cache.entries[key]["us"]
            elif self.spent_s >= self.budget_s:
                self._first(kernel, kernel.configs("default"))
                how = "heuristic (search budget spent)"
            else:
                us = self._search(kernel, key, candidates)
                how = "searched"
        self.report.append({"layer": kernel.layer.name, "type": kernel.layer.type, "key": key,
                            "config": dict(kernel.config), "how": how, "us": us})

    def _try(self, kernel, config) -> bool:
        """Applies `config` if the kernel and the device can run it (one that is not
        a configuration of this kernel, e.g. from an edited cache, is refused)."""
        try:
            kernel.use(config)
            return True
        except (ConfigRejected, ValueError, KeyError, TypeError):
            return False
        except (BuildError, cl.Error) as exc:
            self._failed(config, exc)
            return False

    def _failed(self, config, exc):
        """A configuration that does not build or run on the device: skipped (the
        others, the kernels before tiling among them, still compete), said once."""
        detail = str(exc).strip().splitlines()
        message = (f"the GPU kernel configuration {config} fails on {self.device.full_name} and is skipped: "
                   f"{' / '.join(detail[:1] + detail[-2:])[:400]}")
        if message not in self._failures:
            self._failures.append(message)

    def _first(self, kernel, candidates):
        for config in list(candidates) + kernel.configs("1"):
            if self._try(kernel, config):
                return
        raise IRError(f"layer {kernel.layer.name!r}: no kernel configuration runs on {self.device.full_name}")

    def _search(self, kernel, key, candidates) -> float:
        start = time.perf_counter()
        best, best_us = None, float("inf")
        reference = None  # the outputs of the first trusted configuration that ran
        # trusted configurations first: the ones to verify are compared with them
        candidates = sorted(candidates, key=kernel.verify)
        try:
            for config in candidates:
                if time.perf_counter() - start + self.spent_s > self.budget_s and best is not None:
                    break
                checked = kernel.verify(config)
                try:
                    kernel.use(config, keep_others=True)
                    us, outs = self._time(kernel, best_us, checked)
                    outputs = self._outputs(kernel, outs) if checked or reference is None else None
                except ConfigRejected:
                    continue
                except (BuildError, cl.Error) as exc:
                    self._failed(config, exc)
                    continue
                if not checked:
                    reference = outputs if reference is None else reference
                elif reference is None or not _agree(outputs, reference):
                    self._failed(config, "its results differ from the other kernels'" if reference is not None
                                 else "no trusted kernel ran to check its results against")
                    continue
                if us < best_us:
                    best, best_us = config, us
        finally:
            self.spent_s += time.perf_counter() - start
        if best is None:
            raise IRError(f"layer {kernel.layer.name!r}: no kernel configuration runs on {self.device.full_name}")
        kernel.use(best)
        self.searched += 1
        if not self.skip:  # a search without some families is not the device's best: not kept
            self.cache.put(key, best, best_us)
        return best_us

    def _outputs(self, kernel, outs) -> list:
        """The output buffers `outs` of the kernel's last timed run, on the host."""
        dtype = kernel.ctx.dtype
        result = []
        for buffer, shape in zip(outs, kernel.out_shapes):
            host = np.empty(int(np.prod(shape)), dtype)
            cl.enqueue_copy(self._queue, host, buffer)
            result.append(host.astype(np.float32))
        return result

    def release(self):
        """Frees the timing buffers and queue (after a plan's shapes are tuned)."""
        self._buffers = {}
        self._queue = None

    # --- timing ------------------------------------------------------------------------
    def _buffer(self, role, nbytes: int, dtype) -> cl.Buffer:
        """A device buffer of random values (inputs) or scratch, kept per role and size."""
        key = (role, nbytes)
        if key not in self._buffers:
            values = np.random.default_rng(len(self._buffers)).standard_normal(max(nbytes // dtype.itemsize, 1))
            host = values.astype(dtype)
            self._buffers[key] = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                           hostbuf=host)
        return self._buffers[key]

    def _time(self, kernel, best_us: float, checked: bool = False) -> tuple[float, list]:
        """Median microseconds of the kernel's launches (first start to last end), and
        the output buffers they wrote (filled with NaN first when `checked`: where the
        kernel writes nothing, the check of its results sees it)."""
        if self._queue is None:
            self._queue = cl.CommandQueue(self.device.context,
                                          properties=cl.command_queue_properties.PROFILING_ENABLE)
        dtype = kernel.ctx.dtype

        def size(shape):
            return int(np.prod(shape)) * dtype.itemsize
        ins = [self._buffer(("in", i), size(s), dtype) for i, s in enumerate(kernel.in_shapes)]
        if getattr(kernel, "residual", False):
            ins.append(self._buffer("residual", size(kernel.out_shapes[0]), dtype))
        outs = [self._buffer(("out", i), size(s), dtype) for i, s in enumerate(kernel.out_shapes)]
        if checked:
            for buffer in outs:
                cl.enqueue_fill_buffer(self._queue, buffer, dtype.type(np.nan), 0, buffer.size)
        scratch = [self._buffer(("scratch", i), n, np.dtype(np.float32))
                   for i, n in enumerate(getattr(kernel, "scratch_bytes", lambda: [])())]
        placed = [(k, k.place) for k in (kernel,) + tuple(getattr(kernel, "siblings", ()))
                  if getattr(k, "place", None) is not None]
        for k, _ in placed:
            k.place = None  # timed into buffers of its own
        try:
            launches = kernel.launches(ins, outs, *([scratch] if scratch else []))
        finally:
            for k, place in placed:
                k.place = place
        objects = []
        for launch in launches:
            k = cl.Kernel(launch.program, launch.name)
            k.set_args(*launch.args)
            objects.append((k, launch))

        def run() -> float:
            events = [cl.enqueue_nd_range_kernel(self._queue, k, launch.global_size, launch.local_size)
                      for k, launch in objects]
            events[-1].wait()
            return (events[-1].profile.end - events[0].profile.start) / 1e3
        run()  # a first launch may load the program on the device: never timed
        first = run()
        if first > SLOW * best_us:
            return first, outs
        return statistics.median([first] + [run() for _ in range(REPEATS.get(self.mode, 3) - 1)]), outs
