"""What the CPU daemon costs a synchronous request over the same plan run in-process,
on real networks and on a one-layer one.

    python benchmarks/daemon_overhead.py [--models relu,bvlc_googlenet,keras_resnet50]
                                         [--iterations 100] [--rounds 3]

For each network, the IR our converter makes (batch 1) runs
- in-process: device_daemons.cpu.plan.ExecutionPlan, the daemon's own default backend
  (oneDNN where it runs a layer), infer() on the calling thread;
- through the daemon: IECore(...).load_network(net, "CPU").infer() against a private
  daemon (its own runtime directory) started for the process,
each alone in a fresh process, `--rounds` rounds interleaving the two so that a change
of the machine's load hits both alike; the same random input (seed 0); both use the
same oneDNN thread count (printed). Latency: the median of a process's iterations, then
the median over the rounds. relu is Input -> ReLU on 1x3x224x224 (the request path
alone). The goal (issue 25): the daemon adds at most 0.3 ms or 2% to any network.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MODELS = ("relu", "bvlc_googlenet", "keras_resnet50")
KERAS = {"keras_resnet50": "resnet50"}  # benchmark name -> the graph of tests/tf/keras_apps.py
ENGINES = ("plan", "daemon")
GOAL_MS, GOAL_SHARE = 0.3, 0.02


def make_ir(model: str, out_dir: str) -> str:
    """Our IR of `model` at batch 1 in out_dir."""
    if model == "relu":
        from ir import Edge, Layer, Network, Port, write_ir
        dims = (1, 3, 224, 224)
        net = Network(name="relu", layers=[Layer(0, "data", "Input", outputs=[Port(0, dims)]),
                                           Layer(1, "relu", "ReLU", inputs=[Port(0, dims)], outputs=[Port(1, dims)])],
                      edges=[Edge(0, 0, 1, 0)])
        xml = os.path.join(out_dir, "relu.xml")
        write_ir(net, xml)
        return xml
    from benchmarks.references import bvlc_model, keras_model
    if model in KERAS:
        source = ["--input_model", keras_model(KERAS[model])]
    else:
        proto, weights = bvlc_model(model)
        source = ["--input_model", weights, "--input_proto", proto]
    subprocess.run([sys.executable, "-m", "cli", "convert", *source, "-b", "1", "--output_dir", out_dir,
                    "--model_name", model, "--silent"], check=True, cwd=ROOT)
    return os.path.join(out_dir, model + ".xml")


def run_engine(engine: str, xml: str, iterations: int) -> None:
    """One engine on one IR, alone in this process: prints JSON {median, min, threads}."""
    from device_daemons.cpu.onednn.library import NativeUnavailable, load
    from ir import read_ir
    network = read_ir(xml)
    inputs = {layer.name: np.random.default_rng(0).standard_normal(layer.outputs[0].dims).astype(np.float32)
              for layer in network.inputs()}
    if engine == "plan":
        from device_daemons.cpu.plan import ExecutionPlan
        plan = ExecutionPlan(network)
        infer, backend = plan.infer, plan.program.backend
    else:
        from device_daemons.client import IECore
        ie = IECore(policy="auto")
        exec_net = ie.load_network(ie.read_network(model=xml), "CPU")
        infer, backend = exec_net.infer, "daemon"
    try:
        threads = load().default_threads
    except NativeUnavailable:
        threads = None
    warmup = max(20, iterations // 5)
    for _ in range(warmup):
        infer(inputs)
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        infer(inputs)
        times.append(time.perf_counter() - start)
    print(json.dumps({"median": statistics.median(times), "min": min(times), "threads": threads,
                      "backend": backend}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)  # one measuring process
    parser.add_argument("--xml", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        run_engine(args.engine, args.xml, args.iterations)
        return 0
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit("unknown model(s) {}; choose from {}".format(", ".join(unknown), ", ".join(MODELS)))
    work = tempfile.mkdtemp(prefix="mo-daemon-overhead-")
    results = {m: {e: [] for e in ENGINES} for m in models}
    threads = {}
    loads = [os.getloadavg()[0]]
    try:
        xmls = {m: make_ir(m, work) for m in models}
        for r in range(args.rounds):
            for model in models:
                for engine in ENGINES:
                    runtime = os.path.join(work, "rt-{}-{}-{}".format(model, engine, r))
                    env = dict(os.environ, MO_CORE_RUNTIME_DIR=runtime,
                               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
                    try:
                        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--engine", engine, "--xml",
                                               xmls[model], "--iterations", str(args.iterations)],
                                              capture_output=True, text=True, env=env, cwd=ROOT)
                    finally:
                        subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env,
                                       capture_output=True, cwd=ROOT)
                    if proc.returncode:
                        raise SystemExit("{} on {} failed:\n{}".format(engine, model, proc.stderr[-3000:]))
                    out = json.loads(proc.stdout.strip().splitlines()[-1])
                    results[model][engine].append(out["median"])
                    threads[model, engine] = out["threads"]
            loads.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("daemon vs the same plan in-process, batch 1, synchronous requests; {} rounds x {} iterations (median of "
          "the rounds' medians; min-max of the rounds)".format(args.rounds, args.iterations))
    print("{:<16}{:>12}{:>18}{:>12}{:>18}{:>13}{:>9}{:>9}  {}".format(
        "network", "plan ms", "rounds", "daemon ms", "rounds", "overhead ms", "share", "threads", "goal"))
    met = True
    for model in models:
        plan, daemon = (statistics.median(results[model][e]) for e in ENGINES)
        extra = daemon - plan
        ok = extra <= GOAL_MS * 1e-3 or extra <= GOAL_SHARE * plan
        met &= ok
        spans = ["{:.3f}-{:.3f}".format(min(results[model][e]) * 1e3, max(results[model][e]) * 1e3) for e in ENGINES]
        print("{:<16}{:>12.3f}{:>18}{:>12.3f}{:>18}{:>13.3f}{:>8.1f}%{:>9}  {}".format(
            model, plan * 1e3, spans[0], daemon * 1e3, spans[1], extra * 1e3, 100 * extra / plan,
            "{}/{}".format(threads[model, "plan"], threads[model, "daemon"]), "met" if ok else "NOT met"))
    print("goal: the daemon adds <= {} ms or <= {:.0f}% over the plan in-process on every network: {}; load average "
          "during the runs {:.2f}-{:.2f} (os.getloadavg, 1 min), {} CPUs".format(
              GOAL_MS, 100 * GOAL_SHARE, "met" if met else "NOT met", min(loads), max(loads),
              len(os.sched_getaffinity(0))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
