"""The Ray mode on a real two-node Ray cluster that the test starts on this machine:
`mo-core serve --ray` deploys a model with two replicas, one per node, each with a
daemon of its own; both answer. A replica's daemon killed -9 and a node stopped
while clients send requests: every request either gets the right answer or a clean
error, the deployment recovers, and no daemon outlives its replica or server."""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.daemon.conftest import F32
from tests.support import REPO

from .conftest import reference
from .ray_cluster import RayCluster
from .servers import ServerProcess, processes_of

MODEL = "tiny_ray"


@pytest.fixture(scope="module")
def ray_setup(serving_models, tmp_path_factory):
    _, repo = serving_models
    ray_repo = tmp_path_factory.mktemp("ray_repo")
    shutil.copytree(os.path.join(repo, "tiny", "1"), ray_repo / MODEL / "1")
    (ray_repo / MODEL / "config.json").write_text(json.dumps({"replicas": 2, "resources": {"num_cpus": 1},
                                                              "plugin_config": F32}))  # vs pycaffe to 1e-5
    cluster = RayCluster(cpus_per_node=2)
    srv = None
    try:
        srv = ServerProcess(str(ray_repo), "--ray", cluster.address, cache_dir=str(tmp_path_factory.mktemp("rc")),
                            env=cluster.auth, timeout=300)
        yield cluster, srv, str(ray_repo)
    finally:
        pattern = f"/tmp/mo-ray-{srv.proc.pid}-*" if srv else None
        left_by_server, code = [], 0
        if srv is not None:
            code = srv.stop()
            # a graceful stop deletes the applications: every replica stops its daemon
            left_by_server = _wait_no_processes(pattern)
        cluster.stop()
        left = _wait_no_processes(pattern) if pattern else []
        for d in glob.glob(pattern or "/nonexistent"):  # (a replica Ray killed cannot remove its directory)
            shutil.rmtree(d, ignore_errors=True)
        assert code == 0, srv.log_text()
        assert left_by_server == [], f"processes outlived the Ray mode server's stop: {left_by_server}"
        assert left == [], f"processes outlived the Ray cluster: {left}"


def _wait_no_processes(pattern: str, timeout: float = 30.0) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(processes_of(d) for d in glob.glob(pattern)):
        time.sleep(0.2)
    return [(d, processes_of(d)) for d in glob.glob(pattern) if processes_of(d)]


def replica_dirs(srv) -> dict[str, str]:
    """{runtime dir: node id prefix} of the server's replicas."""
    out = {}
    for d in glob.glob(f"/tmp/mo-ray-{srv.proc.pid}-*"):
        node = os.path.basename(d).split("-")[3]
        out[d] = node
    return out


def daemon_requests(runtime_dir: str) -> int:
    env = dict(os.environ, MO_CORE_RUNTIME_DIR=runtime_dir, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-m", "cli", "daemon", "status"], capture_output=True, text=True, env=env,
                         timeout=60).stdout
    return sum(int(n) for n in re.findall(r"\((\d+) requests\)", out))


def daemon_pids(runtime_dir: str) -> list[int]:
    return [pid for pid in processes_of(runtime_dir)
            if b"device_daemons.cpu" in open(f"/proc/{pid}/cmdline", "rb").read()]


def inputs(i):
    return np.random.default_rng(1000 + i).standard_normal((1, 3, 16, 16)).astype(np.float32)


def request(client, x):
    t = httpclient.InferInput("data", [1, 3, 16, 16], "FP32")
    t.set_data_from_numpy(x, binary_data=True)
    return client.infer(MODEL, [t]).as_numpy("prob")


def under_load(srv, refs, disturb, clients=3, seconds=20.0):
    """Clients send requests while `disturb()` runs; returns (successes, clean
    errors); anything else (a wrong answer, a dropped connection) fails the test."""
    outcome = {"ok": 0, "errors": [], "bad": []}
    lock = threading.Lock()
    stop = threading.Event()

    def client(c):
        http = httpclient.InferenceServerClient(srv.http, network_timeout=120)
        i = 0
        while not stop.is_set():
            k = (c * 7 + i) % len(refs)
            i += 1
            try:
                out = request(http, inputs(k))
                good = np.allclose(out, refs[k], rtol=1e-5, atol=1e-7)
                with lock:
                    if good:
                        outcome["ok"] += 1
                    else:
                        outcome["bad"].append("a wrong answer")
            except InferenceServerException as exc:
                with lock:
                    (outcome["errors"] if exc.status() in ("500", "503") and exc.message()
                     else outcome["bad"]).append(f"{exc.status()} {exc.message()}")
            except Exception as exc:  # noqa: BLE001 - not a clean protocol error
                with lock:
                    outcome["bad"].append(repr(exc))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        disturb()
        time.sleep(seconds)
    finally:
        stop.set()
        for t in threads:
            t.join(180)
    assert outcome["bad"] == [], outcome["bad"][:5]
    return outcome["ok"], outcome["errors"]


def recovers(srv, refs, timeout=120.0, streak=10) -> bool:
    """`streak` right answers in a row within `timeout`."""
    http = httpclient.InferenceServerClient(srv.http, network_timeout=120)
    deadline = time.monotonic() + timeout
    good = 0
    while time.monotonic() < deadline and good < streak:
        k = good % len(refs)
        try:
            good = good + 1 if np.allclose(request(http, inputs(k)), refs[k], rtol=1e-5, atol=1e-7) else 0
        except InferenceServerException:
            good = 0
            time.sleep(0.5)
    return good >= streak


@pytest.fixture(scope="module")
def refs(ray_setup, direct_ie):
    _, _, repo = ray_setup
    return [reference(direct_ie, f"{repo}/{MODEL}/1/model.xml", {"data": inputs(i)})["prob"] for i in range(8)]


def test_replicas_on_both_nodes_answer(ray_setup, refs):
    cluster, srv, _ = ray_setup
    ok, errors = under_load(srv, refs, lambda: None, clients=4, seconds=4.0)
    assert ok > 8 and errors == []
    dirs = replica_dirs(srv)
    served = {node for d, node in dirs.items() if daemon_pids(d) and daemon_requests(d) > 0}
    assert len(served) == 2, dirs  # two replicas, on two nodes, each answered through its own daemon
    stats = httpclient.InferenceServerClient(srv.http).get_inference_statistics(MODEL)["model_stats"][0]
    assert stats["inference_count"] >= ok
    # the same front end as the embedded mode: gRPC too, metadata from the replicas
    grpc = grpcclient.InferenceServerClient(srv.grpc)
    assert grpc.is_server_ready() and grpc.get_model_metadata(MODEL).inputs[0].name == "data"
    t = grpcclient.InferInput("data", [1, 3, 16, 16], "FP32")
    t.set_data_from_numpy(inputs(3))
    np.testing.assert_allclose(grpc.infer(MODEL, [t]).as_numpy("prob"), refs[3], rtol=1e-5, atol=1e-7)


def test_a_replicas_daemon_killed_mid_load(ray_setup, refs):
    _, srv, _ = ray_setup
    victim_dir = next(d for d in replica_dirs(srv) if daemon_pids(d))
    (victim,) = daemon_pids(victim_dir)
    ok, errors = under_load(srv, refs, lambda: os.kill(victim, signal.SIGKILL), seconds=6.0)
    assert ok > 0
    assert recovers(srv, refs)
    # the replica started a new daemon of its own
    assert daemon_pids(victim_dir) and victim not in daemon_pids(victim_dir)


def test_a_node_stopped_mid_load(ray_setup, refs):
    cluster, srv, _ = ray_setup
    before = replica_dirs(srv)
    ok, errors = under_load(srv, refs, lambda: cluster.stop_group(cluster.worker_group, grace=5.0), seconds=8.0)
    assert ok > 0
    assert recovers(srv, refs, timeout=180)
    # the stopped node's replica took its daemon with it
    nodes = set(before.values())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(
            not processes_of(d) for d in before):
        time.sleep(0.2)
    gone = [d for d in before if not processes_of(d)]
    assert gone, (before, nodes)
