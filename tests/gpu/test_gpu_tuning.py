"""The per-device kernel search (device_daemons/gpu/tuning.py) on real OpenCL
(PoCL here, its GPU-style kernels): the first load times candidates per
distinct layer shape and writes the cache, the next load reuses it, a cache
written for another driver version is discarded, a corrupt cache is ignored
with a warning and rewritten; the modes, the time bound and `mo-core tune`."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ir import IRError
from tests.gpu.gpu_helpers import chain_ir, rand
from tests.support import REPO, env_without

CONV = {"kernel": "3,3", "strides": "1,1", "pads_begin": "1,1", "pads_end": "1,1", "group": 1}


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private MO_CORE_HOME (the cache's directory) and the GPU kernels on PoCL."""
    monkeypatch.setenv("MO_CORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MO_CORE_GPU_STYLE", "simt")
    monkeypatch.delenv("MO_CORE_GPU_TUNE", raising=False)
    return tmp_path / "home"


@pytest.fixture
def net(tmp_path):
    """conv a (3 -> 4) -> ReLU -> conv b and conv c of one shape (4 -> 4) -> FullyConnected."""
    rng = np.random.default_rng(0)
    shape = (1, 3, 6, 5)
    inner = (1, 4, 6, 5)
    layers = [("a", "Convolution", dict(CONV, output=4), {"weights": rand(rng, 4, 3, 3, 3)}, inner),
              ("r", "ReLU", {}, None, inner),
              ("b", "Convolution", dict(CONV, output=4), {"weights": rand(rng, 4, 4, 3, 3)}, inner),
              ("c", "Convolution", dict(CONV, output=4), {"weights": rand(rng, 4, 4, 3, 3)}, inner),
              ("fc", "FullyConnected", {"out-size": 5}, {"weights": rand(rng, 5, 120)}, (1, 5))]
    return chain_ir(tmp_path, shape, layers)


def plan_of(net, device, **options):
    from device_daemons.cpu import ExecutionPlan
    from device_daemons.gpu import GpuPlan
    plan = GpuPlan(net, device, **options)
    x = np.random.default_rng(1).standard_normal((1, 3, 6, 5)).astype(np.float32)
    ref = ExecutionPlan(net).infer({"data": x})
    out = plan.infer({"data": x})
    assert np.abs(out["fc"] - ref["fc"]).max() <= 1e-5 * np.abs(ref["fc"]).max()
    return plan


def cache_file(home):
    files = os.listdir(home / "gpu-tune")
    assert [f for f in files if f.endswith(".json")] == [f for f in files if not f.startswith(".")]
    (name,) = [f for f in files if f.endswith(".json") and not f.startswith(".")]
    return home / "gpu-tune" / name


def how(plan):
    return {row["layer"]: row["how"] for row in plan.tuner.report}


def test_the_first_load_searches_each_shape_once_and_the_next_reuses_the_cache(home, net, gpu_device):
    plan = plan_of(net, gpu_device, tune="1")
    assert how(plan) == {"a": "searched", "b": "searched", "c": "cached", "fc": "searched"}  # c: b's shape
    assert plan.tuner.searched == 3 and plan.warnings == []
    path = cache_file(home)
    data = json.loads(path.read_text())
    assert data["identity"]["device"] == gpu_device.name and data["identity"]["driver"] == gpu_device.driver
    assert len(data["entries"]) == 3
    candidates = {key: entry for key, entry in data["entries"].items()}
    for row in plan.tuner.report:
        entry = candidates[row["key"]]
        assert entry["config"] == row["config"] and entry["us"] > 0
        kernel = next(st.kernel for st in plan.steps if st.layer.name == row["layer"])
        assert row["config"] in kernel.configs("1")  # the search's choice is one of its candidates
    written = path.read_bytes()

    again = plan_of(net, gpu_device, tune="1")
    assert set(how(again).values()) == {"cached"} and again.tuner.searched == 0
    assert [r["config"] for r in again.tuner.report] == [r["config"] for r in plan.tuner.report]
    assert path.read_bytes() == written  # nothing searched, nothing written


def test_a_cache_of_another_driver_version_is_discarded(home, net, gpu_device):
    plan_of(net, gpu_device, tune="1")
    path = cache_file(home)
    data = json.loads(path.read_text())
    data["identity"]["driver"] = "0.0-an-older-driver"
    stale = {key: dict(entry, config={"kernel": "direct"}) for key, entry in data["entries"].items()}
    path.write_text(json.dumps(dict(data, entries=stale)))

    plan = plan_of(net, gpu_device, tune="1")
    assert plan.tuner.searched == 3 and plan.warnings == []
    rewritten = json.loads(path.read_text())
    assert rewritten["identity"]["driver"] == gpu_device.driver
    assert len(rewritten["entries"]) == 3  # the old driver's choices are gone, not merged


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", json.dumps({"format": 1, "entries": []}).encode(),
                                     json.dumps([1, 2]).encode(), b"[" * 100000 + b"]" * 100000],
                         ids=["syntax", "bytes", "structure", "list", "nested"])
def test_a_corrupt_cache_is_ignored_with_a_warning_and_rewritten(home, net, gpu_device, content):
    plan_of(net, gpu_device, tune="1")
    path = cache_file(home)
    path.write_bytes(content)
    plan = plan_of(net, gpu_device, tune="1")
    assert len(plan.warnings) == 1 and str(path) in plan.warnings[0] and "ignored" in plan.warnings[0]
    assert plan.tuner.searched == 3
    assert len(json.loads(path.read_text())["entries"]) == 3


def test_entries_with_bad_values_are_skipped(home, net, gpu_device):
    plan_of(net, gpu_device, tune="1")
    path = cache_file(home)
    data = json.loads(path.read_text())
    keys = sorted(data["entries"])
    data["entries"][keys[0]]["config"] = {"kernel": "tiled", "tm": "64; rm -rf"}   # not a config a kernel runs
    data["entries"][keys[1]] = {"config": {"kernel": ["x"]}}                       # not a config at all
    path.write_text(json.dumps(data))
    plan = plan_of(net, gpu_device, tune="1")
    assert plan.tuner.searched == 2 and plan.warnings == []


def test_a_configuration_that_does_not_build_is_skipped_with_a_warning(home, net, gpu_device):
    """A configuration the device's compiler refuses (here a gemv with -1 rows a
    pass: an array of negative size) is reported with the build log; the layer
    takes the search's choice among the others."""
    from device_daemons.gpu.tuning import Tuner
    broken = {"kernel": "gemv", "lx": 32, "opw": 1, "rb": -1}
    plan = plan_of(net, gpu_device, tuner=Tuner(gpu_device, "1", pinned=broken))
    (warning,) = plan.warnings
    assert str(broken) in warning and "fails on" in warning and "does not compile" in warning
    assert how(plan)["fc"] == "searched" and plan.tuner.report[-1]["config"] != broken
    nonsense = {"kernel": "tiled", "tm": 48, "tn": 16, "tk": 16, "wm": 4, "wn": 4, "ks": 1}  # 48: no power of two
    plan = plan_of(net, gpu_device, tuner=Tuner(gpu_device, "1", pinned=nonsense))
    assert plan.warnings == [] and "pinned" not in how(plan).values()


def test_modes_and_the_time_bound(home, net, gpu_device, monkeypatch):
    from device_daemons.gpu.tuning import Tuner
    assert Tuner(gpu_device).mode == ("1" if gpu_device.is_gpu else "0")  # unset: search on GPUs only
    monkeypatch.setenv("MO_CORE_GPU_TUNE", "0")
    plan = plan_of(net, gpu_device)
    assert plan.tuner.mode == "0" and set(how(plan).values()) == {"heuristic"}
    assert not (home / "gpu-tune").exists()
    monkeypatch.setenv("MO_CORE_GPU_TUNE", "1")
    assert Tuner(gpu_device).mode == "1"
    monkeypatch.setenv("MO_CORE_GPU_TUNE", "fast")
    with pytest.raises(IRError, match="MO_CORE_GPU_TUNE='fast' is not one of 0"):
        plan_of(net, gpu_device)
    monkeypatch.delenv("MO_CORE_GPU_TUNE")
    monkeypatch.setenv("MO_CORE_GPU_TUNE_S", "soon")
    with pytest.raises(IRError, match="MO_CORE_GPU_TUNE_S='soon' is not a number of seconds"):
        Tuner(gpu_device, "1")
    monkeypatch.setenv("MO_CORE_GPU_TUNE_S", "0")
    bounded = plan_of(net, gpu_device, tune="1")
    assert set(how(bounded).values()) == {"heuristic (search budget spent)"} and bounded.tuner.searched == 0
    assert not (home / "gpu-tune").exists()  # nothing searched, nothing kept
    assert [r["config"] for r in bounded.tuner.report] == [r["config"] for r in plan.tuner.report]


def test_mo_core_tune(home, net, tmp_path):
    xml = str(tmp_path / "chain_FP32.xml")
    env = dict(os.environ, PYTHONPATH=REPO)
    p = subprocess.run([sys.executable, "-m", "cli", "tune", "-m", xml, "-d", "GPU", "-b", "2"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("Device: ") and "kernel style simt" in lines[0]
    rows = {line.split()[0]: line for line in lines[2:-1]}
    assert set(rows) == {"a", "b", "c", "fc"} and "searched" in rows["a"] and "cached" in rows["c"]
    assert lines[-1].startswith("6 layer shapes searched") and str(home / "gpu-tune") in lines[-1]
    entries = json.loads(cache_file(home).read_text())["entries"]
    assert len(entries) == 6  # the IR's batch (as a daemon compiles it first) and batch 2
    assert any("in2x3x6x5" in key for key in entries)
    p = subprocess.run([sys.executable, "-m", "cli", "tune", "-m", xml, "-b", "2"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and p.stdout.splitlines()[-1].startswith("0 layer shapes searched")
    for args, message in ((["-d", "CPU"], "-d must be GPU or GPU.N"), (["-d", "GPU.7"], "asks for OpenCL device 7"),
                          (["-b", "0"], "-b must be at least 1")):
        p = subprocess.run([sys.executable, "-m", "cli", "tune", "-m", xml] + args, cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 1 and p.stderr.startswith("[ ERROR ]") and message in p.stderr, p.stderr
        assert "Traceback" not in p.stderr


def test_mo_core_tune_without_pyopencl_says_what_to_install(tmp_path):
    """A Python without pyopencl (a plain `pip install mo-core`): one [ ERROR ] naming the extra."""
    env = env_without(tmp_path, "pyopencl")
    p = subprocess.run([sys.executable, "-m", "cli", "tune", "-m", str(tmp_path / "net.xml")], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and p.stderr.startswith("[ ERROR ]") and "mo-core[gpu]" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_the_short_search_offers_two_work_groups_per_compute_unit_for_batch_1_layers():
    """A unit test (the device a stand-in with an H200's 132 compute units, beside
    the searches on the real device above): for GoogLeNet's batch-1 GEMMs
    (M output channels x N pixels x K) of at least 4096 outputs, some candidate
    of the short search has at least two work groups (with its K slices) per
    compute unit; the heuristic's choice fills one at least."""
    from device_daemons.gpu.kernels.tiles import _groups, tile_candidates

    class H200:
        compute_units, max_work_group, local_memory = 132, 1024, 48 * 1024
    for m, n, k in [(256, 196, 528), (384, 49, 832), (128, 49, 832), (24, 196, 512), (64, 196, 480),
                    (112, 196, 512), (320, 196, 1440), (128, 784, 256), (32, 784, 192), (192, 3136, 576),
                    (1000, 1, 1024)]:
        short = tile_candidates(m, n, k, 1, H200, "1")
        assert max(_groups(c, m, n, 1) * c["ks"] for c in short) >= 2 * H200.compute_units, (m, n, k)
        first = tile_candidates(m, n, k, 1, H200, "default")[0]
        assert _groups(first, m, n, 1) * first["ks"] >= H200.compute_units, (m, n, k)


def test_a_tensor_core_kernel_with_wrong_results_is_skipped_with_a_warning(home, tmp_path, gpu_device, mma,
                                                                            monkeypatch):
    """The search runs the trusted kernels first and compares each tensor-core
    configuration's outputs with theirs before timing counts (a device whose PTX
    behaves otherwise than the ISA says): here every comparison fails, so each is
    reported and the layer takes one of the others."""
    from device_daemons.gpu import GpuPlan, tuning
    rng = np.random.default_rng(0)
    layers = [("a", "Convolution", dict(CONV, output=4), {"weights": rand(rng, 4, 3, 3, 3)}, (1, 4, 6, 5))]
    network = chain_ir(tmp_path, (1, 3, 6, 5), layers, "FP16")
    checked = []

    def disagree(outputs, reference):
        checked.append(len(outputs))
        return False
    monkeypatch.setattr(tuning, "_agree", disagree)
    plan = GpuPlan(network, gpu_device, tune="1")
    assert checked and plan.tuner.report[0]["config"]["kernel"] != "mma"
    assert plan.warnings and all("differ from the other kernels'" in w for w in plan.warnings)


def test_results_agree_up_to_rounding_not_beyond():
    from device_daemons.gpu.tuning import _agree
    want = np.linspace(-50, 50, 101, dtype=np.float32)
    assert _agree([want + 0.5], [want])            # 1% of the largest value
    assert not _agree([want + 2.0], [want])
    assert not _agree([want[::-1].copy()], [want])  # the right values in the wrong places
    nan = want.copy()
    nan[3] = np.nan
    assert _agree([nan], [nan]) and not _agree([nan], [want]) and not _agree([want], [nan])


def test_a_tensor_core_kernel_that_leaves_outputs_unwritten_is_skipped(home, tmp_path, gpu_device, mma, monkeypatch):
    """The outputs a checked configuration is timed into start as NaN, so that one
    writing only part of them (here: its launch cut to one work group) cannot pass
    on the values a trusted configuration left there."""
    from device_daemons.gpu import GpuPlan
    from device_daemons.gpu.kernels import convolution
    from device_daemons.gpu.kernels.base import Launch
    launches = convolution.Convolution._tiled_launches

    def one_group(self, *args):
        return [Launch(x.program, x.name, x.args, x.local_size, x.local_size) if x.name == "conv_mma" else x
                for x in launches(self, *args)]
    monkeypatch.setattr(convolution.Convolution, "_tiled_launches", one_group)
    rng = np.random.default_rng(0)
    layers = [("a", "Convolution", dict(CONV, output=70), {"weights": rand(rng, 70, 3, 3, 3)}, (1, 70, 12, 11))]
    plan = GpuPlan(chain_ir(tmp_path, (1, 3, 12, 11), layers, "FP16"), gpu_device, tune="1")
    assert plan.tuner.report[0]["config"]["kernel"] != "mma"
    assert plan.warnings and all("differ from the other kernels'" in w for w in plan.warnings)


def test_kernel_families_left_out_of_the_search_and_not_cached(home, net, gpu_device, monkeypatch):
    """MO_CORE_GPU_SKIP: the search times no configuration of the named families
    (a layer that has nothing else keeps its candidates), keeps nothing in the
    cache, and reads no cached choice of a skipped family; an unknown name is an
    error that lists the families."""
    from device_daemons.gpu.tuning import family
    monkeypatch.setenv("MO_CORE_GPU_SKIP", "tiled, vec")
    plan = plan_of(net, gpu_device, tune="1")
    assert {family(r["config"]) for r in plan.tuner.report} & {"tiled", "vec"} == set()
    assert not (home / "gpu-tune").exists()
    monkeypatch.delenv("MO_CORE_GPU_SKIP")
    plan = plan_of(net, gpu_device, tune="1")  # searched and cached
    first = family(plan.tuner.report[0]["config"])  # layer a's choice
    monkeypatch.setenv("MO_CORE_GPU_SKIP", first)
    again = plan_of(net, gpu_device, tune="1")
    assert again.tuner.report[0]["how"] == "searched" and family(again.tuner.report[0]["config"]) != first
    monkeypatch.setenv("MO_CORE_GPU_SKIP", "winograd")
    with pytest.raises(IRError, match="MO_CORE_GPU_SKIP names winograd: kernel families are tiled, vec"):
        plan_of(net, gpu_device, tune="1")
