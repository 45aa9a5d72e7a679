"""Cost of offloading to TensorFlow (TFCustomSubgraphCall layers run by the CPU
daemon's TF worker), every engine in the same run, on graphs built by TensorFlow
(tests/tf_worker/offload_graphs.py, cached):

1. a ResNet bottleneck block (1x56x56x64 in, 1x56x56x256 out: 1x1, 3x3, 1x1
   convolutions and a projection shortcut):
   - TensorFlow alone (the frozen graph, a Session callable, in its own process)
   - TensorFlow alone on the sub-graph the offloaded layer holds (the block with the
     NCHW <-> NHWC Transposes the layer runs inside it), called back to back
   - the block offloaded (--tensorflow_subgraph_patterns "block/.*": one
     TFCustomSubgraphCall) on the CPU daemon
   - the same block converted natively on the CPU daemon (its kernels: oneDNN or numpy)
2. the per-call overhead of an offloaded layer on a 1x56x56x64 tensor: an IR
   holding only Input -> TFCustomSubgraphCall(Erf) on the daemon, minus the
   daemon's own round trip for the same tensors (Input -> ReLU on 1x64x56x56),
   minus TensorFlow's own time for the very GraphDef that layer holds (its NCHW
   Transposes included) in a TensorFlow process. Goal: under 1 ms.
   TensorFlow is timed twice: called back to back (its thread pool stays awake),
   and paced as the daemon's worker is: called once every daemon call of that layer
   (that round's median), asleep for the rest of it - between two of its runs the
   daemon and the client do the rest of the round trip, a gap measured, not assumed
   (the row prints the gap it got; --tf-idle-ms fixes a gap instead); the overhead
   is printed against both.

3. the OS sandbox's cost (core/microkernel/sandbox.py: bwrap + seccomp + prlimit,
   MO_CORE_SANDBOX=off for the other row): the start of a TF worker (spawn,
   TensorFlow's import, hello) and the per-call time of the Erf layer above, run
   by the TFCustomSubgraphCall kernel in this process (the daemon's code path:
   pooled worker, shared buffer passed as a descriptor, bound runs), sandboxed and
   not, interleaved round by round.

    python benchmarks/offload.py [--iterations 50] [--rounds 3] [--tf-idle-ms MS] [--sandbox-only]

Both daemon paths take the same way (the daemon's local carrier), so the round
trip subtracted is the one the offloaded network takes; the daemon's networks run
in f32, as TensorFlow does, and every TensorFlow process runs in a session of its
own, as the daemon and its worker do. Engines run interleaved,
round by round, after a warm-up; the table prints the median of the rounds'
medians and the spread. Outputs are checked against TensorFlow's before timing.
"""
import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.timing import measure  # noqa: E402 (the median, the min)

TF_SCRIPT = r"""
import json, os, statistics, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import tensorflow as tf
tf1 = tf.compat.v1
path, feed_name, fetch_name, x_path, iterations, idle, period = sys.argv[1:8]
idle, period = float(idle), float(period)
graph_def = tf1.GraphDef()
graph_def.ParseFromString(open(path, "rb").read())
graph = tf.Graph()
with graph.as_default():
    tf1.import_graph_def(graph_def, name="")
sess = tf1.Session(graph=graph)
run = sess.make_callable(graph.get_tensor_by_name(fetch_name), [graph.get_tensor_by_name(feed_name)])
x = np.load(x_path)
for _ in range(5):
    out = run(x)
times, gaps, late = [], [], 0.0  # late: how much a sleep overshoots (learnt: asked that much less)
end = time.perf_counter()
for _ in range(int(iterations)):
    # idle: a fixed gap before each call; period: a call every `period` s, the gap what its last run left of it
    gap = idle or (max(0.0, period - times[-1]) if period and times else 0.0)
    if gap:
        time.sleep(max(0.0, gap - late))
    t = time.perf_counter()
    if gap:
        late += 0.5 * ((t - end) - gap)
    gaps.append(t - end)
    run(x)
    end = time.perf_counter()
    times.append(end - t)
np.save(x_path + ".out.npy", out)
print(json.dumps({"median": statistics.median(times), "min": min(times), "gap": statistics.median(gaps[1:] or gaps),
                  "version": tf.__version__}))
"""


def tf_alone(graph_path, feed, fetch, x, iterations, work, idle=0.0, period=0.0):
    """TensorFlow's median time on the graph in a process of its own: called back to back,
    after `idle` s of sleep, or once every `period` s (the rest of it asleep)."""
    x_path = os.path.join(work, "x.npy")
    np.save(x_path, x)
    # a session of its own, as the daemon and its TF worker have: autogroup scheduling gives each one share
    proc = subprocess.run([sys.executable, "-c", TF_SCRIPT, graph_path, feed, fetch, x_path, str(iterations), str(idle),
                           str(period)], capture_output=True, text=True, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""),
                          start_new_session=True)
    if proc.returncode:
        raise SystemExit("TensorFlow failed:\n" + proc.stderr[-3000:])
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["out"] = np.load(x_path + ".out.npy")
    return result


def convert(model, out_dir, name, **options):
    from core.pipeline import ConvertOptions, convert as run
    from ir import write_ir
    ctx = run(ConvertOptions(input_model=model, output_dir=out_dir, model_name=name, batch=1, **options))
    xml = os.path.join(out_dir, name + ".xml")
    write_ir(ctx.network, xml)
    return xml


def relu_ir(out_dir, dims):
    from ir import Edge, Layer, Network, Port, write_ir
    net = Network(name="relu", layers=[Layer(0, "x", "Input", outputs=[Port(0, dims)]),
                                       Layer(1, "relu", "ReLU", inputs=[Port(0, dims)], outputs=[Port(1, dims)])],
                  edges=[Edge(0, 0, 1, 0)], batch=1)
    xml = os.path.join(out_dir, "relu.xml")
    write_ir(net, xml)
    return xml


def subgraph_of(xml):
    """(GraphDef bytes, Placeholder, output tensor) of the IR's TFCustomSubgraphCall layer."""
    from ir import read_ir
    (layer,) = [layer for layer in read_ir(xml).layers if layer.type == "TFCustomSubgraphCall"]
    return (base64.b64decode(layer.data["protobuf"]), layer.data["input_nodes_names"] + ":0",
            layer.data["output_tensors_names"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tf-idle-ms", type=float, default=None,
                        help="a fixed sleep before each timed TensorFlow call of the idle row (default: paced as "
                             "the daemon's worker is, the module doc)")
    parser.add_argument("--sandbox-only", action="store_true", help="only section 3 (the sandbox's cost)")
    args = parser.parse_args()

    from benchmarks.built_models import Models, built
    models = Models(built("offload_graphs", directory=os.path.join(REPO, "tests", "tf_worker")))
    work = tempfile.mkdtemp(prefix="offload-bench-")
    runtime = os.path.join(work, "rt")
    os.environ.update(MO_CORE_RUNTIME_DIR=runtime,
                      PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    try:
        if not args.sandbox_only:
            run(models, work, args)
        sandbox_cost(models, work, args)
    finally:
        from device_daemons.client import daemon
        for device in daemon.running_devices():
            daemon.stop(device, grace=2.0)
        from core.front.tf.worker import stop_worker
        stop_worker()
        shutil.rmtree(work, ignore_errors=True)


def run(models, work, args):
    from device_daemons.client import IECore
    block = models.arrays("resnet_block")
    x_block = block["in1/x"]
    native = convert(models.path("resnet_block"), work, "native")
    offloaded = convert(models.path("resnet_block"), work, "offloaded", tensorflow_subgraph_patterns="block/.*")
    block_graph, block_in, block_out = subgraph_of(offloaded)
    block_pb = os.path.join(work, "block_subgraph.pb")
    with open(block_pb, "wb") as f:
        f.write(block_graph)
    erf = convert(models.path("erf_56"), work, "erf", tensorflow_operation_patterns="Erf")
    erf_graph, erf_in, erf_out = subgraph_of(erf)
    erf_pb = os.path.join(work, "erf_subgraph.pb")
    with open(erf_pb, "wb") as f:
        f.write(erf_graph)
    x_erf = models.arrays("erf_56")["in1/x"]
    x_erf_nchw = np.ascontiguousarray(x_erf.transpose(0, 3, 1, 2))
    relu = relu_ir(work, tuple(x_erf_nchw.shape))

    ie = IECore(policy="auto")
    nets = {}
    for key, xml in (("native", native), ("offloaded", offloaded), ("erf", erf), ("relu", relu)):
        # f32 as TensorFlow computes: the same work (at the daemon's default, bf16 on some CPUs, the native block
        # would differ from TensorFlow's output, and the ReLU's round trip would carry two reorders the Erf has not)
        nets[key] = ie.load_network(ie.read_network(model=xml), "CPU", config={"INFERENCE_PRECISION_HINT": "f32"})
    precision = {nets[key].get_config("INFERENCE_PRECISION_HINT") for key in nets}
    feeds = {"native": {"x": np.ascontiguousarray(x_block.transpose(0, 3, 1, 2))},
             "offloaded": {"x": np.ascontiguousarray(x_block.transpose(0, 3, 1, 2))},
             "erf": {"x": x_erf_nchw}, "relu": {"x": x_erf_nchw}}
    ref = block["out1/0"].transpose(0, 3, 1, 2)
    for key in ("native", "offloaded"):  # the same work: both equal TensorFlow's output
        out = next(iter(nets[key].infer(feeds[key]).values()))
        err = float(np.abs(out - ref).max() / np.abs(ref).max())
        assert err < 1e-4, (key, err)
    erf_out_daemon = next(iter(nets["erf"].infer(feeds["erf"]).values()))
    assert np.allclose(erf_out_daemon, np.vectorize(__import__("math").erf)(x_erf_nchw), atol=1e-6)

    rows = {k: [] for k in ("tf_block", "tf_block_sub", "offloaded", "native", "tf_erf", "tf_erf_idle", "daemon_erf",
                            "daemon_relu")}
    version, gaps = None, []
    for _ in range(args.rounds):
        tf_block = tf_alone(models.path("resnet_block"), "x:0", "Identity:0", x_block, args.iterations, work)
        version = tf_block["version"]
        rows["tf_block"].append(tf_block["median"])
        rows["tf_block_sub"].append(tf_alone(block_pb, block_in, block_out, feeds["offloaded"]["x"], args.iterations,
                                             work)["median"])
        for key in ("offloaded", "native"):
            rows[key].append(measure(lambda k=key: nets[k].infer(feeds[k]), args.iterations)[0])
        tf_erf = tf_alone(erf_pb, erf_in, erf_out, x_erf_nchw, args.iterations * 4, work)
        assert np.allclose(tf_erf["out"], erf_out_daemon, atol=1e-6)
        rows["tf_erf"].append(tf_erf["median"])
        for key in ("erf", "relu"):
            rows["daemon_" + key].append(measure(lambda k=key: nets[k].infer(feeds[k]), args.iterations * 4)[0])
        # the worker's TensorFlow is called once per daemon call, idle the rest of it: paced alike (this round's
        # daemon time), unless --tf-idle-ms fixes the gap
        idle = tf_alone(erf_pb, erf_in, erf_out, x_erf_nchw, args.iterations * 4, work,
                        idle=(args.tf_idle_ms or 0) / 1e3, period=0 if args.tf_idle_ms else rows["daemon_erf"][-1])
        rows["tf_erf_idle"].append(idle["median"])
        gaps.append(idle["gap"])
    for net in nets.values():
        net.close()

    def ms(key):
        values = rows[key]
        return statistics.median(values) * 1e3, (max(values) - min(values)) * 1e3

    print("TensorFlow {}, {} iterations x {} rounds (median of the rounds' medians; spread = max - min); the CPU "
          "daemon's networks at {}".format(version, args.iterations, args.rounds, "/".join(sorted(precision))))
    print()
    print("ResNet bottleneck block, 1x56x56x64 -> 1x56x56x256, batch 1")
    print("{:<48}{:>10}{:>10}{:>12}".format("engine", "ms", "spread", "vs TF"))
    tf_ms = ms("tf_block")[0]
    for key, label in (("tf_block", "TensorFlow alone (Session callable)"),
                       ("tf_block_sub", "TensorFlow alone, the offloaded layer's graph"),
                       ("offloaded", "CPU daemon, block offloaded to TensorFlow"),
                       ("native", "CPU daemon, block converted (its own kernels)")):
        value, spread = ms(key)
        print("{:<48}{:>10.3f}{:>10.3f}{:>11.2f}x".format(label, value, spread, value / tf_ms))
    print()
    print("Per-call overhead of an offloaded layer (Erf) on a 1x56x56x64 tensor")
    daemon_erf, rt = ms("daemon_erf")[0], ms("daemon_relu")[0]
    for key, label in (("daemon_erf", "CPU daemon: Input -> TFCustomSubgraphCall"),
                       ("daemon_relu", "CPU daemon: Input -> ReLU (its round trip)"),
                       ("tf_erf", "TensorFlow alone: the layer's GraphDef"),
                       ("tf_erf_idle", idle_label(args, gaps))):
        value, spread = ms(key)
        print("{:<48}{:>10.3f}{:>10.3f}".format(label, value, spread))
    for key, label in (("tf_erf", "overhead = offloaded - round trip - TensorFlow"),
                       ("tf_erf_idle", "  the same against TensorFlow with those gaps")):
        overhead = daemon_erf - rt - ms(key)[0]
        print("{:<48}{:>10.3f}   (goal: < 1 ms) {}".format(label, overhead, "MET" if overhead < 1.0 else "NOT MET"))

def idle_label(args, gaps) -> str:
    """The paced TensorFlow row's name: its gap before each call (the median over the rounds)."""
    gap = statistics.median(gaps) * 1e3
    if args.tf_idle_ms:
        return "  the same, after {:.3f} ms idle (--tf-idle-ms {:g})".format(gap, args.tf_idle_ms)
    return "  the same, paced as the worker: {:.3f} ms idle".format(gap)


def sandbox_cost(models, work, args):
    """Section 3: a TF worker's start and an offloaded call, with and without the sandbox."""
    from core.microkernel import WorkerProcess
    from core.microkernel.sandbox import Sandbox, probe
    from core.services import tf_worker as contract
    from device_daemons.cpu.plan import ExecutionPlan
    from device_daemons.cpu.tf_backed import stop_worker
    from ir import read_ir
    why_not = probe()
    if why_not is not None:
        print("\nThe OS sandbox is unavailable here ({}): nothing to compare".format(why_not))
        return
    erf = convert(models.path("erf_56"), work, "erf_sandbox", tensorflow_operation_patterns="Erf")
    x = np.ascontiguousarray(models.arrays("erf_56")["in1/x"].transpose(0, 3, 1, 2))
    starts = {"on": [], "off": []}
    calls = {"on": [], "off": []}
    saved = os.environ.get("MO_CORE_SANDBOX")
    try:
        for _ in range(args.rounds):
            for mode in ("on", "off"):
                os.environ["MO_CORE_SANDBOX"] = "require" if mode == "on" else "off"
                worker = WorkerProcess(contract.WORKER_MODULE, name="tf", interpreter=contract.worker_python(),
                                       startup_timeout=300, env=contract.WORKER_ENV, sandbox=Sandbox())
                t0 = time.perf_counter()
                worker.start()
                starts[mode].append(time.perf_counter() - t0)
                worker.stop()
                plan = ExecutionPlan(read_ir(erf))
                (name, _), = plan.input_shapes().items()
                for _ in range(5):
                    plan.infer({name: x})  # warm: loaded, the buffer shared, runs bound
                calls[mode].append(measure(lambda: plan.infer({name: x}), args.iterations * 4)[0])
                stop_worker()
    finally:
        if saved is None:
            os.environ.pop("MO_CORE_SANDBOX", None)
        else:
            os.environ["MO_CORE_SANDBOX"] = saved

    def ms(values):
        return statistics.median(values) * 1e3, (max(values) - min(values)) * 1e3
    print()
    print("The OS sandbox's cost (bwrap + seccomp + prlimit; load average {:.2f} {:.2f} {:.2f})".format(
        *os.getloadavg()))
    print("{:<48}{:>10}{:>10}{:>12}".format("", "ms", "spread", "vs off"))
    for what, rows in (("TF worker start (spawn, import, hello)", starts), ("offloaded Erf call, in-process kernel",
                                                                          calls)):
        off = ms(rows["off"])[0]
        for mode in ("off", "on"):
            value, spread = ms(rows[mode])
            print("{:<48}{:>10.3f}{:>10.3f}{:>11.2f}x".format("{}, sandbox {}".format(what, mode), value, spread,
                                                             value / off))


if __name__ == "__main__":
    main()
