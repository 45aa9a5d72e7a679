"""Dynamic batching on a real server: 16 concurrent clients, each with its own
input, to a model whose config.json merges requests (max_batch_size 8, 20 ms
queue delay). The daemon itself reports requests on networks of batch > 1; every
client gets the result of its own input, equal to the daemon called directly."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.support import REPO

from .conftest import reference

CLIENTS = 16
ROUNDS = 3


def daemon_networks(runtime_dir: str) -> dict[int, int]:
    """{batch: requests} of the server's CPU daemon, as `mo-core daemon status` tells."""
    env = dict(os.environ, MO_CORE_RUNTIME_DIR=runtime_dir, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-m", "cli", "daemon", "status"], capture_output=True, text=True,
                         env=env, timeout=60).stdout
    found: dict[int, int] = {}
    for batch, requests in re.findall(r"handle \d+: \S+ data\[(\d+), 3, 16, 16\] \((\d+) requests\)", out):
        found[int(batch)] = found.get(int(batch), 0) + int(requests)
    assert found, out
    return found


def test_concurrent_clients_are_batched_and_get_their_own_results(server, serving_models, direct_ie):
    _, repo = serving_models
    xs = [np.random.default_rng(100 + i).standard_normal((1, 3, 16, 16)).astype(np.float32) for i in range(CLIENTS)]
    refs = [reference(direct_ie, f"{repo}/tiny_batched/2/model.xml", {"data": x})["prob"] for x in xs]
    before = daemon_networks(server.runtime_dir)
    barrier = threading.Barrier(CLIENTS)
    results: dict[int, list] = {i: [] for i in range(CLIENTS)}
    errors = []

    def client(i):
        try:
            http = httpclient.InferenceServerClient(server.http)
            t = httpclient.InferInput("image", [1, 3, 16, 16], "FP32")
            t.set_data_from_numpy(xs[i], binary_data=True)
            for _ in range(ROUNDS):
                barrier.wait(timeout=60)
                results[i].append(http.infer("tiny_batched", [t]).as_numpy("prob"))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for i in range(CLIENTS):
        assert len(results[i]) == ROUNDS
        for ours in results[i]:
            np.testing.assert_allclose(ours, refs[i], rtol=1e-5, atol=1e-7)
    after = daemon_networks(server.runtime_dir)
    batched = {b: after[b] - before.get(b, 0) for b in after if b > 1 and after[b] > before.get(b, 0)}
    assert batched, (before, after)
    # the server's own statistics agree: executions of batch > 1, fewer executions than requests
    stats = httpclient.InferenceServerClient(server.http).get_inference_statistics("tiny_batched")["model_stats"][0]
    assert any(b["batch_size"] > 1 for b in stats["batch_stats"])
    assert stats["execution_count"] < stats["inference_count"] == CLIENTS * ROUNDS


def test_a_batch_request_and_too_large_a_batch(server):
    http = httpclient.InferenceServerClient(server.http)
    x = np.random.default_rng(7).standard_normal((3, 3, 16, 16)).astype(np.float32)
    t = httpclient.InferInput("image", [3, 3, 16, 16], "FP32")
    t.set_data_from_numpy(x)
    out = http.infer("tiny_batched", [t]).as_numpy("prob")
    assert out.shape == (3, 10)
    for i in range(3):
        t1 = httpclient.InferInput("image", [1, 3, 16, 16], "FP32")
        t1.set_data_from_numpy(x[i:i + 1])
        np.testing.assert_allclose(http.infer("tiny_batched", [t1]).as_numpy("prob"), out[i:i + 1], rtol=1e-5,
                                   atol=1e-7)
    big = httpclient.InferInput("image", [9, 3, 16, 16], "FP32")
    big.set_data_from_numpy(np.zeros((9, 3, 16, 16), np.float32))
    with pytest.raises(InferenceServerException, match="batch 1 to 8"):
        http.infer("tiny_batched", [big])
