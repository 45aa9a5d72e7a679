"""The TF worker killed (SIGKILL) in the middle of a request - during a conversion and
during an inference - is a clean error, and the next request works; no worker is
left behind after `daemon stop` or when the daemon itself is killed; a daemon
without TensorFlow says so naming the layer; an IR whose sub-graph would reach the
file system is refused. Real TensorFlow, real processes.

"In the middle of a request": the graphs of offload_graphs.py's `heavy` family keep
TensorFlow busy for seconds; the kill comes once the (warm, otherwise idle) worker
has burnt CPU time on the request - an observed state, not a sleep."""
from __future__ import annotations

import base64
import os
import re
import signal
import threading
import time

import numpy as np
import pytest

from core.errors import Error
from core.front.tf.loader import tf_pb2
from ir import read_ir, write_ir
from tests.daemon.conftest import private_runtime, run_mo
from tests.support import convert_api, wait_until, worker_python_pid
from tests.tf.test_tf_worker import python_without_tensorflow
from tests.tf.tf_helpers import convert_model, run_on_daemon

HEAVY = {"tensorflow_subgraph_patterns": "heavy/.*"}


def tf_workers(marker: str) -> list[int]:
    """Live TF worker processes (the Python inside the sandbox) of a daemon (named
    DAEMON_WORKER: their directories hold it) whose command line holds `marker` (their
    endpoint is in a runtime directory: the marker names it)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = open("/proc/{}/cmdline".format(entry), "rb").read()
            state = open("/proc/{}/stat".format(entry), "rb").read()
        except OSError:
            continue
        from device_daemons.cpu.tf_backed import WORKER_NAME
        ours = (b"fallback_workers.tf_worker" in cmdline and "-{}-".format(WORKER_NAME).encode() in cmdline and
                marker.encode() in cmdline and not cmdline.startswith((b"/usr/bin/bwrap", b"/usr/bin/prlimit")))
        if ours and state[state.rindex(b")") + 2:].split()[0] != b"Z":
            pids.append(int(entry))
    return pids


def cpu_seconds(pid: int) -> float:
    try:
        fields = open("/proc/{}/stat".format(pid)).read().rsplit(")", 1)[1].split()
    except OSError:
        return -1.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kill_when_busy(pid: int, seconds: float = 1.0, timeout: float = 120) -> None:
    """SIGKILL the worker `pid` (its Python, in its sandbox) once it has used `seconds` more
    CPU time (it is computing a request)."""
    pid = worker_python_pid(pid)
    start = cpu_seconds(pid)
    assert wait_until(lambda: cpu_seconds(pid) - start >= seconds, timeout), "the TF worker never got busy"
    os.kill(pid, signal.SIGKILL)


def in_thread(fn):
    box = {}

    def run():
        try:
            box["result"] = fn()
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            box["error"] = exc
    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def test_kill_during_conversion_then_the_next_conversion_works(offload_graphs, tmp_path):
    from core.front.tf import worker
    convert_api(input_model=offload_graphs.path("unsupported_chain"), batch=1,
                offload_unsupported_operations_to_tf=True)  # the converter's worker is warm (TensorFlow imported)
    pid = worker.worker_pid()
    assert pid is not None
    options = dict(input_model=offload_graphs.path("heavy_where"), batch=1, offload_unsupported_operations_to_tf=True)
    thread, box = in_thread(lambda: convert_api(**options))
    kill_when_busy(pid, seconds=0.3)  # (early: the whole conversion took ~1 CPU second on an AMX machine)
    thread.join(300)
    error = box.get("error")
    assert isinstance(error, Error), box
    text = str(error)
    # (which node: where the worker was when the kill came - the Where's data-dependent shapes, or
    # the offloaded MatMuls' after them on a machine that finished those within the CPU second)
    assert re.search(r"inferring the output shapes of '(Where|heavy/[^']+)'", text) and "SIGKILL" in text, text
    network = convert_api(**options)  # a new worker
    assert worker.worker_pid() not in (None, pid)
    assert network.layer_by_name("Where").outputs[0].dims[1] == 2


def test_a_worker_killed_while_idle_is_replaced_by_the_next_conversion(offload_graphs):
    """The converter's worker has no restart budget (a death during a request fails that
    request); one that died between requests is replaced, not blamed on the next one."""
    from core.front.tf import worker
    options = dict(input_model=offload_graphs.path("unsupported_chain"), batch=1,
                   offload_unsupported_operations_to_tf=True)
    convert_api(**options)
    pid = worker.worker_pid()
    os.kill(worker_python_pid(pid), signal.SIGKILL)
    assert wait_until(lambda: not worker._worker.alive(), 30)
    convert_api(**options)
    assert worker.worker_pid() not in (None, pid)


def test_kill_during_inference_quarantines_the_graph_and_others_run(ie, offload_graphs, tmp_path):
    """The worker killed while it runs a graph: a clean error; that graph is then refused
    for a while with the reason (it may be what kills workers: it must not spend everyone's
    restart budget), and other graphs run on a restarted worker."""
    xml = convert_model(offload_graphs.path("heavy"), tmp_path, "heavy", batch=1, **HEAVY)
    arrays = offload_graphs.arrays("heavy")
    feeds = {"x": arrays["in1/x"]}
    run_on_daemon(ie, xml, feeds)  # the daemon's worker runs it once: it is warm
    runtime = os.environ["MO_CORE_RUNTIME_DIR"]
    for attempt in range(3):
        before = tf_workers(runtime)
        wait_idle(before)  # (a pool worker still starting - importing TensorFlow - would look busy)
        thread, box = in_thread(lambda: run_on_daemon(ie, xml, feeds))
        busy = wait_busy(before, seconds=0.3)  # (early in its run: a fast machine finishes it in ~1.5 CPU seconds)
        if not thread.is_alive():  # done before this (starved) thread saw its worker busy: not the case to test
            continue
        os.kill(busy, signal.SIGKILL)
        thread.join(300)
        error = box.get("error")
        assert error is not None, f"the request succeeded although worker {busy} was killed during it: {box}"
        break
    else:
        pytest.fail("the graph finished before the test could kill its worker, 3 times")
    assert "heavy/Mean" in str(error) and "TF worker failed" in str(error), box
    with pytest.raises(Exception) as again:
        run_on_daemon(ie, xml, feeds)
    assert "quarantined" in str(again.value) and "SIGKILL" in str(again.value), again.value
    other = convert_model(offload_graphs.path("einsum"), tmp_path, "einsum", batch=1,
                          offload_unsupported_operations_to_tf=True)
    einsum = offload_graphs.arrays("einsum")
    _, out = run_on_daemon(ie, other, {"x": einsum["in1/x"]})
    np.testing.assert_allclose(next(iter(out.values())), einsum["out1/0"], rtol=1e-4, atol=1e-5)
    assert busy not in tf_workers(runtime)


def wait_idle(pids: list[int], quiet: float = 0.5, timeout: float = 120) -> None:
    """Until none of these pids uses CPU time for `quiet` seconds."""
    def still():
        start = {pid: cpu_seconds(pid) for pid in pids}
        time.sleep(quiet)
        return all(cpu_seconds(pid) - start[pid] < 0.05 for pid in pids)
    assert wait_until(still, timeout), "the TF workers did not settle"


def wait_busy(pids: list[int], seconds: float = 1.0, timeout: float = 120) -> int:
    """The one of these worker pids that has used `seconds` more CPU time (it computes a request)."""
    start = {pid: cpu_seconds(pid) for pid in pids}
    found = []
    assert wait_until(lambda: found.extend(p for p in pids if cpu_seconds(p) - start[p] >= seconds) or found,
                      timeout), "no TF worker got busy"
    return found[0]


def test_no_worker_left_after_daemon_stop_or_a_killed_daemon(offload_graphs, tmp_path):
    xml = convert_model(offload_graphs.path("einsum"), tmp_path, "einsum", batch=1,
                        offload_unsupported_operations_to_tf=True)
    x = offload_graphs.arrays("einsum")["in1/x"]
    with private_runtime("tfk-") as runtime:
        from device_daemons.client import IECore
        assert run_mo("daemon", "start", "--device", "CPU").returncode == 0
        run_on_daemon(IECore(policy="auto"), xml, {"x": x})
        assert len(tf_workers(runtime)) == 1
        res = run_mo("daemon", "stop", "--device", "CPU")
        assert res.returncode == 0, res.stderr
        assert wait_until(lambda: tf_workers(runtime) == [], 30)
        # the daemon killed: its worker sees its parent go and exits
        run_on_daemon(IECore(policy="auto"), xml, {"x": x})
        from device_daemons import registry
        daemon_pid = registry.read_record("CPU")["pid"]
        (worker_pid,) = tf_workers(runtime)
        os.kill(daemon_pid, signal.SIGKILL)
        assert wait_until(lambda: tf_workers(runtime) == [], 30), "the TF worker outlived its daemon"
        assert worker_pid not in tf_workers(runtime)


def test_a_daemon_without_tensorflow_names_the_layer(offload_graphs, tmp_path):
    xml = convert_model(offload_graphs.path("einsum"), tmp_path, "einsum", batch=1,
                        offload_unsupported_operations_to_tf=True)
    python = python_without_tensorflow(tmp_path / "venv")
    with private_runtime("tfn-", MO_CORE_TF_PYTHON=python):
        from device_daemons.client import IECore
        ie = IECore(policy="auto")
        with pytest.raises(Exception) as info:
            ie.load_network(ie.read_network(model=xml), "CPU")
    text = str(info.value)
    assert "einsum/Einsum" in text and "TFCustomSubgraphCall" in text and "pip install tensorflow-cpu" in text
    assert "MO_CORE_TF_PYTHON" in text


def test_a_sub_graph_that_reaches_the_file_system_is_refused(ie, offload_graphs, tmp_path):
    """An IR never chooses what runs outside the network's tensors: the daemon's worker refuses
    a GraphDef whose output would run a file operation (here a WriteFile its output has as a
    control input), and nothing is written."""
    xml = convert_model(offload_graphs.path("einsum"), tmp_path, "einsum", batch=1,
                        offload_unsupported_operations_to_tf=True)
    net = read_ir(xml)
    layer = next(layer for layer in net.layers if layer.type == "TFCustomSubgraphCall")
    graph = tf_pb2().GraphDef()
    graph.ParseFromString(base64.b64decode(layer.data["protobuf"]))
    target = tmp_path / "written_by_the_ir"
    for name, text in (("path", str(target)), ("contents", "gotcha")):
        node = graph.node.add(name=name, op="Const")
        node.attr["dtype"].type = 7
        node.attr["value"].tensor.dtype = 7
        node.attr["value"].tensor.string_val.append(text.encode())
    graph.node.add(name="write", op="WriteFile", input=["path", "contents"])
    output = layer.data["output_tensors_names"].split(",")[0].split(":")[0]
    next(n for n in graph.node if n.name == output).input.append("^write")
    layer.data["protobuf"] = base64.b64encode(graph.SerializeToString()).decode()
    bad = str(tmp_path / "bad.xml")
    write_ir(net, bad)
    with pytest.raises(Exception) as info:
        run_on_daemon(ie, bad, {"x": offload_graphs.arrays("einsum")["in1/x"]})
    assert "op 'WriteFile' (node 'write')" in str(info.value) and "refused" in str(info.value)
    assert not target.exists()
