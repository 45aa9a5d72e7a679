"""Tensors of offloaded layers through a shared buffer (core/microkernel/shared_buffer.py):
the CPU daemon hands its sealed memfd to its (sandboxed) TF worker as a descriptor,
the worker maps it and the results equal TensorFlow's; a TF worker refuses any other
descriptor (a file that is no memfd, another name or size, an unsealed memfd) and a
request naming a buffer it was not given or a tensor past its end. Real TensorFlow,
real processes."""
from __future__ import annotations

import base64
import os
import signal
import time

import numpy as np
import pytest

from core.microkernel import RemoteError, WorkerProcess
from core.microkernel import shared_buffer
from core.microkernel.sandbox import Sandbox
from core.microkernel.shared_buffer import SharedBuffer
from core.services import tf_worker as contract
from ir import read_ir
from tests.support import worker_python_pid
from tests.tf.tf_helpers import convert_model, run_on_daemon
from tests.tf_worker.test_kill import tf_workers

ERF = {"tensorflow_operation_patterns": "Erf"}


def worker_maps(pid: int) -> str:
    with open("/proc/{}/maps".format(worker_python_pid(pid))) as f:
        return f.read()


def test_the_daemon_worker_reads_and_writes_the_daemon_buffer(ie, offload_graphs, tmp_path):
    xml = convert_model(offload_graphs.path("erf_56"), tmp_path, "erf", batch=1, **ERF)
    arrays = offload_graphs.arrays("erf_56")
    _, out = run_on_daemon(ie, xml, {"x": arrays["in1/x"]})
    np.testing.assert_allclose(next(iter(out.values())), arrays["out1/0"], rtol=1e-5, atol=1e-6)
    (pid,) = tf_workers(os.environ["MO_CORE_RUNTIME_DIR"])
    assert "/memfd:" + shared_buffer.PREFIX in worker_maps(pid), "the tensors did not go through a shared buffer"


@pytest.fixture(scope="module")
def erf_worker(offload_graphs, tmp_path_factory):
    """A TF worker launched by this process (its parent), the erf_56 sub-graph loaded."""
    xml = convert_model(offload_graphs.path("erf_56"), tmp_path_factory.mktemp("shm"), "erf", batch=1, **ERF)
    layer = next(layer for layer in read_ir(xml).layers if layer.type == "TFCustomSubgraphCall")
    graph = base64.b64decode(layer.data["protobuf"])
    inputs = [n for n in layer.data["input_nodes_names"].split(",") if n]
    outputs = [n for n in layer.data["output_tensors_names"].split(",") if n]
    graph_id = contract.subgraph_id(graph, inputs, outputs)
    worker = WorkerProcess(contract.WORKER_MODULE, name="tf", interpreter=contract.worker_python(),
                           startup_timeout=180, request_timeout=120,
                           env=contract.WORKER_ENV, sandbox=Sandbox())
    try:
        args, frames = contract.load_subgraph_request(graph_id, graph, inputs, outputs)
        worker.call(contract.LOAD_SUBGRAPH, args, frames)
        x = np.ascontiguousarray(offload_graphs.arrays("erf_56")["in1/x"].transpose(0, 3, 1, 2))  # the IR's NCHW
        yield worker, graph_id, x
    finally:
        worker.stop()


def share(worker, spec: dict, fds: list):
    """RAW_SHARE of descriptors as the daemon sends its buffer's."""
    reply = worker.call_raw(contract.RAW_SHARE, contract.share_request(spec), 30, fds=fds)
    assert reply is not None, "the worker has no Unix socket to take descriptors"
    return contract.RUN_REPLY.unpack(reply)[0]


def run_shared(worker, graph_id, spec, inputs, out, buf=None):
    """On the worker's local carrier, as the daemon calls it (the same checks as its main socket);
    `buf` is shared first."""
    if buf is not None:
        assert share(worker, buf.spec, [buf.fd]) == contract.RUN_OK
    args, frames = contract.run_subgraph_shm_request(graph_id, spec, inputs, out)
    return worker.call(contract.RUN_SUBGRAPH, args, frames, direct=True, lane="local")


def test_a_buffer_of_the_parent_works_like_frames(erf_worker):
    worker, graph_id, x = erf_worker
    assert contract.RUN_SUBGRAPH in worker.service_info["direct"]["ops"]  # what the daemon calls
    (offset,), out = shared_buffer.place([x.shape])
    buf = SharedBuffer(out + 4 * x.size + shared_buffer.ALIGN)
    try:
        np.copyto(buf.view(offset, x.shape), x)
        result, frames = run_shared(worker, graph_id, buf.spec, [(offset, x.shape)], out, buf)
        assert frames == []
        (placed,) = contract.check_placed(result, 1, buf.size)
        args, frames = contract.run_subgraph_request(graph_id, [x])
        _, (expected,) = worker.call(contract.RUN_SUBGRAPH, args, frames)
        np.testing.assert_array_equal(buf.view(*placed), expected)
    finally:
        buf.close()


def unsealed_memfd(size: int) -> int:
    fd = os.memfd_create(shared_buffer.PREFIX + "unsealed", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    return fd


def test_a_forged_buffer_is_refused(erf_worker, tmp_path):
    worker, graph_id, x = erf_worker
    (offset,), out = shared_buffer.place([x.shape])
    size = out + 4 * x.size
    buf = SharedBuffer(size)
    plain = os.open(str(tmp_path / "plain"), os.O_RDWR | os.O_CREAT)
    os.ftruncate(plain, size)
    unsealed = unsealed_memfd(size)
    try:
        with pytest.raises(RemoteError) as info:  # never shared with this worker
            run_shared(worker, graph_id, buf.spec, [(offset, x.shape)], out)
        assert info.value.kind == contract.UNSHARED, info.value
        forged = {
            "a plain file": (buf.spec, [plain]),
            "another name": (dict(buf.spec, name=shared_buffer.PREFIX + "0123456789abcdef"), [buf.fd]),
            "another size": (dict(buf.spec, size=size - 64), [buf.fd]),
            "unsealed memfd": ({"name": shared_buffer.PREFIX + "unsealed", "size": size}, [unsealed]),
            "two descriptors": (buf.spec, [buf.fd, buf.fd]),
        }
        for what, (spec, fds) in forged.items():
            with pytest.raises(RemoteError) as info:
                share(worker, spec, fds)
            assert "cannot map the shared buffer" in info.value.message, (what, info.value)
        assert share(worker, buf.spec, [buf.fd]) == contract.RUN_OK
        bad_spans = {
            "input past the end": ([(size - 64, x.shape)], out, contract.SHM),
            "output start past the end": ([(offset, x.shape)], size + 64, contract.REQUEST),
            "outputs do not fit": ([(offset, x.shape)], size - 64, contract.SHM),
            "misaligned offset": ([(offset + 1, x.shape)], out, contract.REQUEST),
            "too big a buffer": None,
        }
        for what, case in bad_spans.items():
            spec = dict(buf.spec)
            if case is None:
                spec["size"], case = contract.MAX_SHARED_BYTES + 1, ([(offset, x.shape)], out, contract.REQUEST)
            inputs, start, kind = case
            with pytest.raises(RemoteError) as info:
                run_shared(worker, graph_id, spec, inputs, start)
            assert info.value.kind == kind, (what, info.value)
        # the real buffer still works after all that
        np.copyto(buf.view(offset, x.shape), x)
        result, _ = run_shared(worker, graph_id, buf.spec, [(offset, x.shape)], out)
        (placed,) = contract.check_placed(result, 1, size)
        assert np.isfinite(buf.view(*placed)).all()
    finally:
        buf.close()
        os.close(plain)
        os.close(unsealed)


def test_the_worker_keeps_a_bounded_number_of_buffers_mapped(erf_worker):
    """Buffers the parent dropped do not pile up in the worker: at most MAX_SUBGRAPHS stay mapped,
    and the least recently used one is mapped again when it is shared again."""
    worker, graph_id, x = erf_worker
    (offset,), out = shared_buffer.place([x.shape])
    buffers = [SharedBuffer(out + 4 * x.size) for _ in range(contract.MAX_SUBGRAPHS + 3)]
    try:
        for buf in buffers + buffers[:1]:
            np.copyto(buf.view(offset, x.shape), x)
            result, _ = run_shared(worker, graph_id, buf.spec, [(offset, x.shape)], out, buf)
            (placed,) = contract.check_placed(result, 1, buf.size)
            assert np.isfinite(buf.view(*placed)).all()
        mapped = {line.split("/memfd:")[1].split()[0] for line in worker_maps(worker.pid).splitlines()
                  if "/memfd:" + shared_buffer.PREFIX in line}
        assert len(mapped) <= contract.MAX_SUBGRAPHS and buffers[0].name in mapped, len(mapped)
    finally:
        for buf in buffers:
            buf.close()


def test_outputs_read_from_the_buffer_survive_the_next_run(offload_graphs, tmp_path):
    """The kernel hands out views of its shared buffer (Kernel.reuses_output) instead of
    copying them out: an output the caller keeps is copied once by the program, one
    written into run(out=...) goes straight there. In-process plan, real TF worker."""
    import math
    from device_daemons.cpu.plan import ExecutionPlan
    from device_daemons.cpu.tf_backed import stop_worker
    xml = convert_model(offload_graphs.path("erf_56"), tmp_path, "erf", batch=1, **ERF)
    try:
        plan = ExecutionPlan(read_ir(xml))
        (name, shape), = plan.input_shapes().items()
        assert plan.program.lent_outputs  # the layer's output is the network's
        rng = np.random.default_rng(3)
        x1, x2 = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        erf = np.vectorize(math.erf)
        out1 = plan.infer({name: x1})
        out2 = plan.infer({name: x2})
        (key,) = out1
        np.testing.assert_allclose(out1[key], erf(x1), atol=1e-6)  # not overwritten by the second run
        np.testing.assert_allclose(out2[key], erf(x2), atol=1e-6)
        dest = np.full(out1[key].shape, np.nan, np.float32)
        got = plan.infer({name: x1}, out={key: dest})
        assert got[key] is dest
        np.testing.assert_allclose(dest, erf(x1), atol=1e-6)
        np.testing.assert_allclose(out2[key], erf(x2), atol=1e-6)
        # runs after the first are bound (bound_runs.py); a worker killed between two of them: the next run
        # starts a new one, loads the graph and binds again
        kernel = next(step.kernel for step in plan.program.steps if getattr(step, "type", "") == "TFCustomSubgraphCall")
        assert kernel.binding is not None and kernel.bindable
        os.kill(worker_python_pid(kernel.slot.worker.pid), signal.SIGKILL)
        time.sleep(0.2)
        for seed in range(3):
            x = rng.standard_normal(shape).astype(np.float32) * (seed + 1)
            np.testing.assert_allclose(plan.infer({name: x})[key], erf(x), atol=1e-6)
        assert kernel.binding is not None
    finally:
        stop_worker()


def test_lent_outputs_follow_views():
    """Which outputs a program copies (device_daemons/cpu/program.py): those of a kernel
    that reuses its buffer, and those that are views of them (Reshape-like kernels, custom
    kernels unless they say otherwise), not those computed from them."""
    from types import SimpleNamespace as NS
    from device_daemons.cpu.program import _lent_outputs

    def step(kernel, ins, outs, backend="numpy"):
        return NS(kernel=kernel, in_slots=ins, out_slots=outs, backend=backend)
    reuse = NS(reuses_output=True, output_is_view=False)
    view = NS(reuses_output=False, output_is_view=True)
    new = NS(reuses_output=False, output_is_view=False)
    custom = NS()  # a custom kernel that says nothing: it may return views
    steps = [step(reuse, (0,), (1,)), step(view, (1,), (2,)), step(new, (1,), (3,)), step(custom, (2,), (4,), "custom"),
             step(None, (3,), (5,)), step(view, (0,), (6,))]
    outputs = [("tf", 1), ("reshaped", 2), ("computed", 3), ("custom", 4), ("onednn", 5), ("input_view", 6)]
    assert _lent_outputs(steps, outputs) == ["tf", "reshaped", "custom"]


def test_bound_runs(erf_worker):
    """bind_run and the raw RAW_RUN (fallback_workers/tf_worker/bound_runs.py) on a real worker:
    each bound run computes the inputs in the buffer now; unknown ids, bad datagrams and bad
    bindings get their status or error."""
    worker, graph_id, x = erf_worker
    assert worker.service_info["direct"]["raw"] == [contract.RAW_RUN, contract.RAW_SHARE]
    (offset,), out = shared_buffer.place([x.shape])
    buf = SharedBuffer(out + 4 * x.size + shared_buffer.ALIGN)

    def run(payload):
        return contract.RUN_REPLY.unpack(worker.call_raw(contract.RAW_RUN, payload, 30))[0]

    def bind(inputs, placed, gid=graph_id):
        args = contract.bind_run_request(gid, buf.spec, inputs, placed)
        return contract.check_bind_run_result(worker.call(contract.BIND_RUN, args, direct=True, lane="local")[0])
    try:
        np.copyto(buf.view(offset, x.shape), x)
        result, _ = run_shared(worker, graph_id, buf.spec, [(offset, x.shape)], out, buf)
        placed = contract.check_placed(result, 1, buf.size)
        bid = bind([(offset, x.shape)], placed)
        for scale in (1.0, -2.0, 0.25):
            np.copyto(buf.view(offset, x.shape), x * scale)
            buf.view(*placed[0])[...] = np.nan
            assert run(contract.RUN_REQUEST.pack(bid)) == contract.RUN_OK
            args, frames = contract.run_subgraph_request(graph_id, [x * scale])
            _, (expected,) = worker.call(contract.RUN_SUBGRAPH, args, frames)
            np.testing.assert_array_equal(buf.view(*placed[0]), expected)
        assert run(contract.RUN_REQUEST.pack(bid + 1)) == contract.RUN_UNKNOWN
        assert run(b"short") == contract.RUN_FAILED
        for inputs, outs, gid, kind in (([(offset, x.shape)], placed, "ab" * 16, contract.UNKNOWN_SUBGRAPH),
                                        ([(offset, x.shape)], placed * 2, graph_id, contract.REQUEST),
                                        ([(offset, (1,) + x.shape)], placed, graph_id, contract.REQUEST),
                                        ([(offset, x.shape)], [(buf.size, (1,))], graph_id, contract.SHM)):
            with pytest.raises(RemoteError) as info:
                bind(inputs, outs, gid)
            assert info.value.kind == kind
        assert run(contract.RUN_REQUEST.pack(bid)) == contract.RUN_OK  # still bound
    finally:
        buf.close()
