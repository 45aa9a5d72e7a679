"""Per-layer performance counts of the CPU daemon (real daemon processes): the IECore
API (PERF_COUNT config, get_perf_counts) and `infer -pc` / `benchmark -pc`."""
from __future__ import annotations

import re

import pytest

from device_daemons.client import IECore
from tests.daemon.conftest import F32, assert_close, run_mo

# tiny: conv1 -> relu1 -> pool1 -> fc1 -> prob (tests/daemon/conftest.py)
TINY_TYPES = {"conv1": "Convolution", "relu1": "ReLU", "pool1": "Pooling", "fc1": "FullyConnected",
              "prob": "SoftMax"}
# oneDNN's implementation names: "brgconv:avx512_core", "x64:gemm:jit", several joined by "+"
KERNEL = r"[a-z0-9_]+(:[a-z0-9_]+)+(\+[a-z0-9_]+(:[a-z0-9_]+)+)*"


@pytest.mark.timeout(120)
def test_perf_count_from_set_config(tiny):
    """IE's set_config({"PERF_COUNT": "YES"}, "CPU") holds for later loads (it was taken for
    the precision but not for PERF_COUNT); the load's own config still overrides it."""
    with IECore(policy="auto", timeout=60) as core:
        core.set_config({"PERF_COUNT": "YES"}, "CPU")
        net = core.load_network(core.read_network(tiny.xml), "CPU", config=F32)
        request = net.requests[0]
        request.infer({"data": tiny.input(1)})
        assert set(TINY_TYPES) <= set(request.get_perf_counts())
        off = core.load_network(core.read_network(tiny.xml), "CPU", config=dict(F32, PERF_COUNT="NO"))
        assert not off.perf_count


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["onednn", "numpy"])
def test_get_perf_counts_names_each_layer_and_its_backend(tiny, fresh_runtime, monkeypatch, backend):
    monkeypatch.setenv("MO_CORE_CPU_BACKEND", backend)  # the daemon this test starts inherits it
    with IECore(policy="auto", timeout=60) as core:
        net = core.load_network(core.read_network(tiny.xml), "CPU", config=dict(F32, PERF_COUNT="YES"))
        request = net.requests[0]
        x = tiny.input(3)
        assert_close(request.infer({"data": x})["prob"], tiny.reference(x))
        counts = request.get_perf_counts()
        layers = {name: c for name, c in counts.items() if name in TINY_TYPES}
        assert {n: c["layer_type"] for n, c in layers.items()} == TINY_TYPES
        if backend == "numpy":
            assert {c["exec_type"] for c in counts.values()} == {"numpy"}
            assert not any("kernel" in c for c in counts.values())
            assert all(c["status"] == "EXECUTED" for c in counts.values())
        else:
            # the ReLU runs inside the convolution; a reorder where a layer wants another layout
            assert layers["relu1"]["status"] == "NOT_RUN"
            assert layers["relu1"]["exec_type"] == "fused into conv1"
            assert {layers[n]["exec_type"] for n in ("conv1", "pool1", "fc1", "prob")} == {"onednn"}
            # and oneDNN's kernel for each (which instructions ran: "brgconv:avx512_core", "jit:avx2", ...)
            assert all(re.fullmatch(KERNEL, layers[n]["kernel"]) for n in ("conv1", "pool1", "fc1", "prob")), layers
            reorders = [c for c in counts.values() if c["layer_type"] == "Reorder"]
            assert all(c["exec_type"] == "onednn" and c["note"] for c in reorders)  # each says why
            assert {layers[n]["precision"] for n in TINY_TYPES} == {"f32"}
        executed = [c for c in counts.values() if c["status"] == "EXECUTED"]
        assert all(c["real_time"] > 0 for c in executed)
        assert sorted(c["execution_index"] for c in counts.values()) == list(range(len(counts)))

        plain = core.load_network(core.read_network(tiny.xml), "CPU")
        plain.infer({"data": x})
        with pytest.raises(Exception, match="PERF_COUNT"):
            plain.requests[0].get_perf_counts()
        with pytest.raises(Exception, match="PERF_COUNT must be YES or NO"):
            core.load_network(core.read_network(tiny.xml), "CPU", config={"PERF_COUNT": "maybe"})


def _rows(stdout: str) -> dict[str, list[str]]:
    """The per-layer table of -pc output: {layer name: [status, type, exec type, precision, ms]}."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Performance counts"))
    rows = {}
    for line in lines[start + 2:]:
        if line.startswith("Total time"):
            break
        parts = re.split(r"\s{2,}", line.strip())
        rows[parts[0]] = parts[1:]
    return rows


@pytest.mark.timeout(180)
def test_infer_and_benchmark_pc_print_the_layers(tiny, tmp_path):
    from device_daemons.cpu.precision import default_precision
    dt = default_precision()  # the daemon's default: each layer's precision is printed
    proc = run_mo("infer", "-m", tiny.xml, "-pc")
    assert proc.returncode == 0, proc.stderr
    assert f"inference precision {dt}" in proc.stdout
    rows = _rows(proc.stdout)
    kernel = "onednn " + KERNEL  # the backend and oneDNN's kernel ("onednn brgconv:avx512_core")
    assert rows["conv1"][:2] == ["EXECUTED", "Convolution"] and rows["conv1"][3] == dt
    assert re.fullmatch(kernel, rows["conv1"][2]), rows["conv1"]
    assert rows["relu1"][:4] == ["NOT_RUN", "ReLU", "fused into conv1", dt]
    assert rows["fc1"][:2] == ["EXECUTED", "FullyConnected"] and rows["fc1"][3] == dt
    assert re.fullmatch(kernel, rows["fc1"][2]), rows["fc1"]
    total = float(re.search(r"Total time: ([0-9.]+) ms", proc.stdout).group(1))
    assert total == pytest.approx(sum(float(r[4]) for r in rows.values() if r[0] == "EXECUTED"), abs=0.01)
    assert re.search(rf"^Convolution\s+onednn\s+{dt}\s+1\s+[0-9.]+\s+[0-9.]+$", proc.stdout, re.M)
    assert "data.0/to_onednn (Reorder): Convolution conv1 reads" in proc.stdout  # why the reorder is there

    proc = run_mo("benchmark", "-m", tiny.xml, "-niter", "6", "-nireq", "2", "-pc")
    assert proc.returncode == 0, proc.stderr
    assert "Performance counts, median of 6 requests" in proc.stdout
    rows = _rows(proc.stdout)
    assert rows["pool1"][:2] == ["EXECUTED", "Pooling"] and re.fullmatch(kernel, rows["pool1"][2]), rows["pool1"]
    assert rows["relu1"][:3] == ["NOT_RUN", "ReLU", "fused into conv1"]


@pytest.mark.timeout(120)
def test_the_perf_flag_of_the_infer_verb(tiny, fresh_runtime):
    """The contract's `perf`: rows on request only; a flag that is not a bool is an
    input error."""
    from core.microkernel import Client, RemoteError
    from device_daemons import contract
    from device_daemons.client import daemon as lifecycle
    launch = lifecycle.launch("CPU", threads=2)
    client = Client(launch.record["endpoint"], timeout=30)
    try:
        handle = client.call("load_network", {"xml": tiny.xml, "config": F32})[0]["handle"]
        x = tiny.input(4)
        plain, _ = client.call("infer", contract.infer_request(handle, inputs={"data": x}))
        assert "perf" not in plain
        result, _ = client.call("infer", contract.infer_request(handle, inputs={"data": x}, perf=True))
        assert_close(result["outputs"]["prob"], tiny.reference(x))
        rows = contract.check_perf(result)
        assert {r["name"] for r in rows} >= set(TINY_TYPES)
        assert {r["status"] for r in rows} <= set(contract.PERF_STATUSES)
        with pytest.raises(RemoteError) as err:
            client.call("infer", {"handle": handle, "inputs": {"data": x}, "perf": 1})
        assert err.value.kind == "input" and "'perf' must be true or false" in err.value.message
    finally:
        client.close()


@pytest.mark.parametrize("rows, problem", [
    ("rows", "must be a list"),
    ([{"name": "a", "type": "ReLU", "backend": "numpy", "status": "executed"}], "ms None"),
    ([{"name": "a", "type": "ReLU", "backend": "numpy", "status": "done", "ms": 1.0}], "status 'done'"),
    ([{"name": "a", "type": "ReLU", "backend": "numpy", "status": "executed", "ms": -1.0}], "ms -1.0"),
    ([{"name": "a", "type": "ReLU", "backend": "numpy", "status": "executed", "ms": float("nan")}], "ms nan"),
    ([{"name": 5, "type": "ReLU", "backend": "numpy", "status": "executed", "ms": 1.0}], "a 'perf' row must be"),
    (["row"], "a 'perf' row must be"),
])
def test_malformed_perf_rows_break_the_contract(rows, problem):
    """Unit test beside the real daemon's rows above: what check_perf refuses."""
    from core.microkernel import ProtocolError
    from device_daemons import contract
    with pytest.raises(ProtocolError, match=re.escape(problem)):
        contract.check_perf({"perf": rows})
    assert contract.check_perf({}) is None
