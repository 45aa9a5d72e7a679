"""Fairness between the clients of one daemon (issue 21, F3/F4): an endless embedded
graph (a TF1 while loop built by real TensorFlow) holds one TF worker, not everyone's
offloaded layers; it meets its deadline, is quarantined with the reason, and the
daemon keeps serving another client correct results throughout. Restart budgets
count over a time window."""
from __future__ import annotations

import time

import numpy as np
import pytest

from core.microkernel import WorkerError
from core.microkernel.launcher import RestartBudget
from tests.daemon.conftest import private_runtime
from tests.sandbox.conftest import embedding_ir, plain_reference
from tests.support import call_in_thread

pytestmark = pytest.mark.timeout(300)
TIMEOUT_S = 20  # the daemon's offload deadline here: longer than a TF worker's start on a busy machine


def test_an_endless_graph_holds_one_worker_and_is_quarantined(hostile, tmp_path):
    from device_daemons.client import IECore
    from device_daemons.client import InferenceError
    x = np.linspace(-1, 1, 4, dtype=np.float32).reshape(1, 4)
    with private_runtime("tff-", MO_CORE_TF_TIMEOUT=str(TIMEOUT_S), MO_CORE_TF_WORKERS="2"):
        ie = IECore(policy="auto")
        plain = ie.load_network(ie.read_network(model=embedding_ir(tmp_path, hostile.path("plain"), "plain")), "CPU")
        endless = ie.load_network(ie.read_network(model=embedding_ir(tmp_path, hostile.path("endless_loop"),
                                                                      "endless")), "CPU")
        started = time.monotonic()
        thread, box = call_in_thread(lambda: endless.infer({"x": x}))
        time.sleep(1.0)  # (the loop is running by then; if not, the next request only finds both workers idle)
        for _ in range(3):
            np.testing.assert_allclose(plain.infer({"x": x})["call"], plain_reference(x), rtol=1e-5, atol=1e-6)
        assert thread.is_alive() and time.monotonic() - started < TIMEOUT_S, "the other client waited for the loop"
        thread.join(TIMEOUT_S + 120)
        assert isinstance(box.get("error"), InferenceError) and "did not answer in time" in str(box["error"]), box
        with pytest.raises(InferenceError) as again:
            endless.infer({"x": x})
        assert "quarantined" in str(again.value) and "did not answer in time" in str(again.value), again.value
        np.testing.assert_allclose(plain.infer({"x": x})["call"], plain_reference(x), rtol=1e-5, atol=1e-6)
        endless.close()
        plain.close()


def test_a_restart_budget_over_a_window_refuses_for_a_while_not_for_good():
    budget = RestartBudget(2, window=0.5)
    budget.spend("tf", None)
    budget.spend("tf", None)
    assert not budget.left
    with pytest.raises(WorkerError) as err:
        budget.spend("tf", "killed by signal SIGABRT")
    assert "2 times in the last 0.5 s" in str(err.value) and "SIGABRT" in str(err.value)
    time.sleep(0.6)
    assert budget.left
    budget.spend("tf", None)
    lifetime = RestartBudget(1)
    lifetime.spend("caffe", None)
    with pytest.raises(WorkerError, match="gave up after 1 restart"):
        lifetime.spend("caffe", None)
