"""`mo-core infer` and `mo-core benchmark` (real processes, real daemon)."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from tests.daemon.conftest import assert_close, run_mo


def _top_k_block(stdout: str, name: str) -> list[tuple[int, float]]:
    lines = stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("Top ") and f"'{name}'" in line))
    rows = []
    for line in lines[start + 4:]:
        m = re.fullmatch(r"(\d+)\s+(-?[0-9.]+(?:e[-+]\d+)?)", line.strip())
        if not m:
            break
        rows.append((int(m.group(1)), float(m.group(2))))
    return rows


@pytest.mark.timeout(120)
def test_infer_npy_top_k_and_npz_output(tiny, tmp_path):
    x = tiny.input(42)
    ref = tiny.reference(x)
    np.save(tmp_path / "x.npy", x)
    out_path = tmp_path / "out.npz"
    proc = run_mo("infer", "-m", tiny.xml, "-i", str(tmp_path / "x.npy"), "--top_k", "3", "-o", str(out_path),
                  "-infer_precision", "f32")  # compared with pycaffe to 1e-4
    assert proc.returncode == 0, proc.stderr
    assert "inference precision f32" in proc.stdout
    assert "Output 'prob': shape [1, 10], min " in proc.stdout
    assert re.search(r"mean [-0-9.e]+, std [-0-9.e]+", proc.stdout)
    rows = _top_k_block(proc.stdout, "prob")
    assert [r[0] for r in rows] == list(np.argsort(-ref[0], kind="stable")[:3])
    np.testing.assert_allclose([r[1] for r in rows], np.sort(ref[0])[::-1][:3], rtol=1e-4)
    with np.load(out_path) as saved:
        assert saved.files == ["prob"]
        assert_close(saved["prob"], ref)
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]  # atomic write left nothing


@pytest.mark.timeout(120)
def test_infer_npz_input_with_another_batch(tiny, tmp_path):
    x = tiny.input(43, batch=2)
    np.savez(tmp_path / "in.npz", data=x)
    proc = run_mo("infer", "-m", tiny.xml, "-i", str(tmp_path / "in.npz"), "--top_k", "2",
                  "-o", str(tmp_path / "o.npz"), "-infer_precision", "f32")
    assert proc.returncode == 0, proc.stderr
    assert "Batch size set to 2" in proc.stdout and "shape [2, 10]" in proc.stdout
    assert "Image 1" in proc.stdout
    with np.load(tmp_path / "o.npz") as saved:
        assert_close(saved["prob"], tiny.reference(x))


@pytest.mark.timeout(120)
def test_infer_random_input_is_reproducible(tiny, tmp_path):
    a = run_mo("infer", "-m", tiny.xml, "-o", str(tmp_path / "a.npz"), "-infer_precision", "f32")
    b = run_mo("infer", "-m", tiny.xml, "-o", str(tmp_path / "b.npz"), "-infer_precision", "f32")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert "random standard normal input, seed 0" in a.stdout
    with np.load(tmp_path / "a.npz") as fa, np.load(tmp_path / "b.npz") as fb:
        np.testing.assert_array_equal(fa["prob"], fb["prob"])
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16), dtype=np.float32)
    with np.load(tmp_path / "a.npz") as fa:
        assert_close(fa["prob"], tiny.reference(x))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", ["npz_wrong_key", "npy_bad_shape", "missing_input", "missing_model",
                                  "bad_top_k", "unknown_device", "pickled", "npz_not_a_zip", "npz_object_member",
                                  "npz_truncated_member", "output_unwritable", "image"])
def test_infer_user_errors(tiny, tmp_path, case):
    args = ["infer", "-m", tiny.xml]
    expect = ""
    if case == "npz_wrong_key":
        np.savez(tmp_path / "in.npz", image=tiny.input(0))
        args += ["-i", str(tmp_path / "in.npz")]
        expect = "image"
    elif case == "npy_bad_shape":
        np.save(tmp_path / "in.npy", np.zeros((1, 3, 8, 8), np.float32))
        args += ["-i", str(tmp_path / "in.npy")]
        expect = "[1, 3, 16, 16]"
    elif case == "missing_input":
        args += ["-i", str(tmp_path / "nope.npy")]
        expect = "cannot find the input file"
    elif case == "missing_model":
        args = ["infer", "-m", str(tmp_path / "nope.xml")]
        expect = "nope.xml"
    elif case == "bad_top_k":
        args += ["--top_k", "0"]
        expect = "--top_k"
    elif case == "unknown_device":
        args += ["-d", "MYRIAD"]
        expect = "unknown device 'MYRIAD'"
    elif case == "pickled":
        np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
        args += ["-i", str(tmp_path / "obj.npy")]
        expect = "cannot read the input file"
    elif case == "npz_not_a_zip":
        (tmp_path / "in.npz").write_bytes(b"not a zip at all")
        args += ["-i", str(tmp_path / "in.npz")]
        expect = "cannot read the input file"
    elif case == "npz_object_member":  # (its members are read lazily: after np.load)
        np.savez(tmp_path / "in.npz", data=np.array([{"a": 1}], dtype=object))
        args += ["-i", str(tmp_path / "in.npz")]
        expect = "cannot read the input file"
    elif case == "npz_truncated_member":
        np.savez(tmp_path / "good.npz", data=tiny.input(0))
        raw = (tmp_path / "good.npz").read_bytes()
        (tmp_path / "in.npz").write_bytes(raw[:200] + raw[-200:])
        args += ["-i", str(tmp_path / "in.npz")]
        expect = "cannot read the input file"
    elif case == "image":
        (tmp_path / "cat.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
        args += ["-i", str(tmp_path / "cat.png")]
        expect = "neither a .npy nor an .npz"
    elif case == "output_unwritable":  # said before the inference runs
        args += ["-o", "/proc/out.npz"]
        expect = "cannot write /proc/out.npz"
    proc = run_mo(*args)
    assert proc.returncode == 1, proc.stdout
    assert "[ ERROR ]" in proc.stderr and expect in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def _networks_named(name: str) -> int:
    """How many networks of that name the (session's) CPU daemon holds."""
    from device_daemons.client import IECore
    with IECore() as ie:
        return sum(n.get("name") == name for n in ie._link("CPU").call("status")[0]["networks"])


@pytest.mark.timeout(120)
def test_sigterm_or_a_failure_unloads_the_network(tiny, tmp_path):
    """mo-core benchmark stopped by SIGTERM unwinds as for Ctrl-C (exit 1, one line) and
    unloads its network; so does an infer whose pipe reader went away (a quiet exit)."""
    import signal
    import subprocess
    import sys
    from tests.support import REPO
    name = os.path.splitext(os.path.basename(tiny.xml))[0]
    before = _networks_named(name)
    proc = subprocess.Popen([sys.executable, "-m", "cli", "benchmark", "-m", tiny.xml, "-niter", "10000000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=REPO))
    for line in proc.stdout:
        if "First inference took" in line:
            break
    assert _networks_named(name) == before + 1
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "[ ERROR ]  Terminated (SIGTERM)." in err and "Traceback" not in err, err
    assert _networks_named(name) == before
    shell = subprocess.run(f"{sys.executable} -m cli infer -m {tiny.xml} --top_k 5 | head -1", shell=True,
                           capture_output=True, text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
    assert "Traceback" not in shell.stderr and "ERROR" not in shell.stderr, shell.stderr
    assert _networks_named(name) == before


def _daemon_requests() -> int:
    """Inference requests the (session's) CPU daemon has served so far."""
    from device_daemons.client import IECore
    with IECore() as ie:
        return ie._link("CPU").call("status")[0]["requests"]


@pytest.mark.timeout(180)
def test_benchmark_prints_the_table(tiny):
    before = _daemon_requests()
    proc = run_mo("benchmark", "-m", tiny.xml, "-niter", "20", "-nireq", "3")
    assert proc.returncode == 0, proc.stderr
    # the daemon itself counted the work: the first inference and the 20 measured
    assert _daemon_requests() - before == 21
    out = proc.stdout
    assert "Count:      20 iterations (3 in flight, batch 1)" in out
    lines = out.splitlines()
    i = lines.index("Latency (ms):")
    assert lines[i + 1].split() == ["median", "p90", "p99", "min", "max"]
    median, p90, p99, lo, hi = map(float, lines[i + 2].split())
    assert 0 < lo <= median <= p90 <= p99 <= hi
    duration_ms = float(re.search(r"Duration: +([0-9.]+) ms", out).group(1))
    fps = float(re.search(r"Throughput: ([0-9.]+) FPS", out).group(1))
    # throughput is the iterations over the duration (both as printed, rounded to 0.01)
    assert abs(fps - 20 / (duration_ms / 1e3)) <= 0.01 + 20 / (duration_ms / 1e3) * 0.01 / duration_ms
    # 3 requests in flight: the wall time is less than the sum of the latencies
    # (unless every request waited for the others: then not more than it)
    assert duration_ms <= 20 * hi
    assert "Progress" not in proc.stderr  # not a tty and no --progress


@pytest.mark.timeout(180)
def test_benchmark_batch_and_progress(tiny):
    proc = run_mo("benchmark", "-m", tiny.xml, "-niter", "10", "-nireq", "2", "-b", "4", "--progress")
    assert proc.returncode == 0, proc.stderr
    assert "batch 4" in proc.stdout
    assert "Progress:" in proc.stderr and "10/10" in proc.stderr


@pytest.mark.timeout(180)
def test_benchmark_app_options(tiny):
    """benchmark_app's -hint, -api and -t; its other words are refused, not taken as a prefix
    of ours (-nt was -nthreads, -i -infer_precision, -hint '-h int')."""
    proc = run_mo("benchmark", "-m", tiny.xml, "-niter", "6", "-hint", "latency")
    assert proc.returncode == 0, proc.stderr
    assert "-hint latency: 1 request(s) in flight" in proc.stdout and "(1 in flight" in proc.stdout
    proc = run_mo("benchmark", "-m", tiny.xml, "-niter", "6", "-hint", "throughput")
    optimal = re.search(r"optimal requests (\d+)", proc.stdout)
    assert proc.returncode == 0 and optimal, proc.stdout + proc.stderr
    assert "({} in flight".format(optimal.group(1)) in proc.stdout
    proc = run_mo("benchmark", "-m", tiny.xml, "-api", "sync", "-t", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert "(1 in flight" in proc.stdout
    assert 400 <= float(re.search(r"Duration: +([0-9.]+) ms", proc.stdout).group(1)) < 5000
    for args, needle in ((("-api", "sync", "-nireq", "2"), "-api sync runs one request at a time"),
                         (("-hint", "latency", "-nireq", "3"), "-hint latency keeps one request"),
                         (("-t", "0"), "-t must be a positive"), (("-nt", "2"), "unrecognized arguments: -nt"),
                         (("-i", "bf16"), "unrecognized arguments: -i"), (("--nite", "3"), "unrecognized")):
        proc = run_mo("benchmark", "-m", tiny.xml, *args)
        assert proc.returncode == 1 and needle in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.timeout(120)
def test_benchmark_user_errors(tiny, slow_model):
    proc = run_mo("benchmark", "-m", tiny.xml, "-niter", "0")
    assert proc.returncode == 1 and "[ ERROR ]" in proc.stderr and "-niter" in proc.stderr
    xml, kernel = slow_model
    proc = run_mo("benchmark", "-m", xml, "-niter", "5")  # custom layer without -l
    assert proc.returncode == 1 and "SlowOp" in proc.stderr and "-l FILE" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_mo("benchmark", "-m", xml, "-niter", "5", "-l", kernel)
    assert proc.returncode == 0, proc.stderr
