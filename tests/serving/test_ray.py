"""The Ray mode on a real two-node Ray cluster that the test starts on this machine:
`mo-core serve --ray` deploys a model with two replicas, one per node, each with a
daemon of its own; both answer. A second server on the same cluster keeps its own
models (same names, other weights), its replicas serve what was loaded even when
Ray Serve replaces one after the files changed, loads that cannot be placed or fail
in the replicas are load errors that say why, and its stop leaves the first
server's applications running. A replica's daemon killed -9 and a node stopped
while clients send requests: every request either gets the right answer or a clean
error, the deployment recovers, and no daemon outlives its replica or server; at
the end Ray Serve itself is stopped."""
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
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from device_daemons.serving.daemons import ENV, OwnedDaemons
from tests.daemon.conftest import F32
from tests.support import REPO, make_caffemodel

from .conftest import reference, write_ir_of
from .ray_cluster import RayCluster, free_port
from .servers import ServerProcess, live_processes, processes_of

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
        left_by_server, controllers, code = [], [], 0
        if srv is not None:
            code = srv.stop()
            # a graceful stop deletes the applications: every replica stops its daemon
            left_by_server = _wait_no_processes(pattern)
            controllers = _wait_no_serve(cluster)  # the last server's stop stops Ray Serve too
        cluster.stop()
        left = _wait_no_processes(pattern) if pattern else []
        for d in glob.glob(pattern or "/nonexistent"):  # (a replica Ray killed cannot remove its directory)
            shutil.rmtree(d, ignore_errors=True)
        assert code == 0, srv.log_text()
        assert left_by_server == [], f"processes outlived the Ray mode server's stop: {left_by_server}"
        assert controllers == [], f"Ray Serve's controller outlived the last server: {controllers}"
        assert left == [], f"processes outlived the Ray cluster: {left}"


def serve_controllers(cluster) -> list[int]:
    """Ray Serve's controller processes on the cluster's nodes."""
    return [pid for pid, cmdline, fields in live_processes()
            if int(fields[2]) in cluster.groups and b"ServeController" in cmdline]


def _wait_no_serve(cluster, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and serve_controllers(cluster):
        time.sleep(0.2)
    return serve_controllers(cluster)


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


def request(client, x, model=MODEL):
    t = httpclient.InferInput("data", [1, 3, 16, 16], "FP32")
    t.set_data_from_numpy(x, binary_data=True)
    return client.infer(model, [t]).as_numpy("prob")


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


def test_daemons_closed_at_once_leave_nothing(monkeypatch):
    """A replica whose model fails at once closes its daemons right after it made them:
    the watchdog still stops them and removes the runtime directory."""
    monkeypatch.setenv(ENV, "")  # (OwnedDaemons sets it for the process: restored after the test)
    for delay in (0.0, 0.05):
        daemons = OwnedDaemons(prefix="mo-ray-test-")
        time.sleep(delay)
        daemons.close()
        assert daemons.watchdog.returncode == 0, delay
        assert not os.path.exists(daemons.runtime_dir), delay


def serve_cli(repository: str, *args, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", "serve", "--model_repository", repository, "--http-port", "0",
                           "--grpc-port", "0", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=REPO, GLOG_minloglevel="2"))


def test_no_cluster_at_the_address_and_a_negative_grace_are_errors(tmp_path):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there: ray.init alone retried for 12 minutes
    t0 = time.monotonic()
    proc = serve_cli(str(tmp_path), "--ray", address)
    assert proc.returncode == 1 and time.monotonic() - t0 < 30, proc.stdout + proc.stderr
    assert f"[ ERROR ]  cannot connect to the Ray cluster at {address}: nothing answers" in proc.stderr, proc.stderr
    proc = serve_cli(str(tmp_path), "--ray", address, "--grace", "inf")  # (Ray Serve refused it at every load)
    assert proc.returncode == 1 and "[ ERROR ]  --grace must be a number of seconds >= 0" in proc.stderr, \
        proc.stdout + proc.stderr


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


@pytest.fixture(scope="module")
def second(ray_setup, serving_models, tmp_path_factory, direct_ie):
    """A second `mo-core serve --ray` on the same cluster: its own tiny_ray (other
    weights, a Caffe model converted on load) and, loaded later by the tests, models
    that cannot load: a device no daemon has, a GPU the cluster lacks, more CPUs than
    the cluster has free. Yields the server, its repository, the prototxt and the
    answer to inputs(0) its tiny_ray must give."""
    cluster, _, _ = ray_setup
    _, repo = serving_models
    proto = os.path.join(os.path.dirname(repo), "tiny.prototxt")
    root = tmp_path_factory.mktemp("second")
    b_repo = root / "repo"
    (b_repo / MODEL / "1").mkdir(parents=True)
    shutil.copy(proto, b_repo / MODEL / "1" / "deploy.prototxt")
    weights = str(b_repo / MODEL / "1" / "tiny.caffemodel")
    make_caffemodel(proto, weights, seed=6, scale=None)
    b_ref = reference(direct_ie, write_ir_of(proto, weights, str(root / "ir")), {"data": inputs(0)})["prob"]
    configs = {MODEL: {"resources": {"num_cpus": 0}, "plugin_config": F32},
               "bad_device": {"resources": {"num_cpus": 0}, "device": "FOO"},
               "gpu": {"resources": {"num_cpus": 0, "num_gpus": 1}},
               "greedy": {"replicas": 2, "resources": {"num_cpus": 2}}}  # 4 CPUs: the first server holds 2
    for name, config in configs.items():
        if name != MODEL:
            shutil.copytree(os.path.join(repo, "tiny", "1"), b_repo / name / "1")
        (b_repo / name / "config.json").write_text(json.dumps(config))
    # (--grace: a stop waits for the deletion of the applications whose replicas were never placed)
    srv = ServerProcess(str(b_repo), "--ray", cluster.address, "--load-model", MODEL, "--grace", "2",
                        cache_dir=str(root / "cache"), timeout=300,
                        env=dict(cluster.auth, MO_CORE_SERVE_RAY_PLACEMENT_TIMEOUT="3"))
    try:
        yield srv, str(b_repo), proto, b_ref
    finally:
        code = srv.stop()
        pattern = f"/tmp/mo-ray-{srv.proc.pid}-*"
        left = _wait_no_processes(pattern)
        for d in glob.glob(pattern):
            shutil.rmtree(d, ignore_errors=True)
        assert code == 0, srv.log_text()
        assert left == [], f"processes outlived the second server's stop: {left}"


def replica_pids(srv, model: str) -> list[int]:
    """The Ray Serve replica processes of `srv`'s model (its application names carry the server's pid)."""
    title = f"ServeReplica:mo-core-{model}-{srv.proc.pid}-".encode()
    return [pid for pid, cmdline, _ in live_processes() if title in cmdline]


def test_two_servers_on_one_cluster_keep_their_own_models(ray_setup, refs, second):
    _, first, _ = ray_setup
    srv, _, _, b_ref = second
    assert not np.allclose(b_ref, refs[0], rtol=1e-3)
    for _ in range(3):  # (the second's start replaced the first's application of the same name)
        np.testing.assert_allclose(request(httpclient.InferenceServerClient(first.http), inputs(0)), refs[0],
                                   rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(request(httpclient.InferenceServerClient(srv.http), inputs(0)), b_ref,
                                   rtol=1e-5, atol=1e-7)


def test_a_replacement_replica_serves_what_was_loaded(second):
    srv, b_repo, proto, b_ref = second
    http = httpclient.InferenceServerClient(srv.http, network_timeout=120)
    make_caffemodel(proto, f"{b_repo}/{MODEL}/1/tiny.caffemodel", seed=7, scale=None)  # edited; nobody loads it
    (victim,) = replica_pids(srv, MODEL)
    os.kill(victim, signal.SIGKILL)  # Ray Serve starts another replica
    deadline = time.monotonic() + 120
    while True:
        try:
            answer = request(http, inputs(0))
            break
        except InferenceServerException:
            assert time.monotonic() < deadline, srv.log_text()
            time.sleep(0.3)
    assert victim not in replica_pids(srv, MODEL) and replica_pids(srv, MODEL)
    np.testing.assert_allclose(answer, b_ref, rtol=1e-5, atol=1e-7)  # (it converted the new files)


def test_loads_that_cannot_run_on_the_cluster_say_why(second):
    srv = second[0]
    expected = {"bad_device": "unknown device 'FOO'",  # the replicas' own error
                "gpu": "its replica needs 1 GPU and no node of the Ray cluster has that much",
                "greedy": "its 2 replicas need 4 CPU in all (2 CPU each) and the Ray cluster has 2 CPU free"}
    t0 = time.monotonic()
    with ThreadPoolExecutor(len(expected)) as pool:  # (loads of different models run side by side)
        replies = dict(zip(expected, pool.map(
            lambda name: httpx.post(f"{srv.url}/v2/repository/models/{name}/load", timeout=120), expected)))
    assert time.monotonic() - t0 < 60
    index = {e["name"]: e for e in httpx.post(f"{srv.url}/v2/repository/index").json()}
    for name, text in expected.items():
        assert replies[name].status_code == 400 and text in replies[name].json()["error"], (name, replies[name].text)
        assert index[name]["state"] == "UNAVAILABLE" and text in index[name]["reason"], index[name]
    assert "add nodes to the cluster" in replies["gpu"].json()["error"]
    assert httpx.get(f"{srv.url}/v2/health/ready").status_code == 200  # the models it serves still serve


def test_a_server_stopped_leaves_the_other_servers_models(ray_setup, refs, second):
    _, first, _ = ray_setup
    srv = second[0]
    assert srv.stop() == 0, srv.log_text()  # (it deleted the first server's application of the same name)
    http = httpclient.InferenceServerClient(first.http)
    for k in range(4):
        np.testing.assert_allclose(request(http, inputs(k)), refs[k], rtol=1e-5, atol=1e-7)


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
