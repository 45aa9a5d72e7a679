"""What the CPU daemon costs a synchronous request over the same plan run in-process,
on real networks and on a one-layer one.

    python benchmarks/daemon_overhead.py [--models relu,bvlc_googlenet,bvlc_alexnet,ssd_style,keras_resnet50,
                                                   keras_mobilenet_v2,keras_mobilenet_v3_small]
                                         [--iterations 100] [--rounds 3] [--precision default|f32]

For each network (default: the one-layer one and every network of benchmarks/infer.py,
converted as there), the IR our converter makes (batch 1) runs
- in-process: device_daemons.cpu.plan.ExecutionPlan, the daemon's own default backend
  (oneDNN where it runs a layer), infer() on the calling thread;
- through the daemon: IECore(...).load_network(net, "CPU").infer() against a private
  daemon (its own runtime directory) started for the round: the way a local client's
  synchronous request takes by default (device_daemons/client/request_path.py),
in one fresh process per network and round; the same random input (seed 0); both with
the same oneDNN thread count and precision (--precision: the daemon's default, bf16
where the CPU has it, or f32; printed as the daemon's load reply gives them, the plan's
beside them where they differ). Measured two ways in that process, so that a
change of the machine's load hits both alike:
- calls: the two called alternately (plan, daemon, plan, ...); the extra time is the
  median of the paired differences (a daemon call minus the plan call before it). Each
  call starts where the other engine's left the cores: its OpenMP threads still spin
  for a while after a request (libgomp's spin, native_build.py) and its data fills
  the caches;
- blocks: BLOCK calls of one, then BLOCK of the other, and so on (the first two of a
  block not counted); the extra time is the median over block pairs of the difference
  of their medians: each engine as a client calling only it sees it, back to back. The measuring
process runs in a session of its own, as the daemon does: with autogroup scheduling a
process of a busy session would get less CPU than the daemon it is compared with.
Per network: the median latency of each (the median of the rounds' medians), and the
daemon's extra time, the median of the paired differences (daemon call minus the plan
call before it), each way's share of the plan's median time in that way (the plan
called back to back in the blocks is not the plan called after a daemon call), and,
from the blocks, the daemon's compute time as its replies report it and what is left
of a daemon call (the round trip: the copy into the slot, two wake-ups, Python on both
sides). relu is Input -> ReLU on 1x3x224x224 (the request path alone). The
goal (issue 25): the daemon adds at most 0.3 ms or 2% to any network.
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

from benchmarks import infer  # noqa: E402  (the networks and their conversion)

MODELS = ("relu", *infer.MODELS)
GOAL_MS, GOAL_SHARE = 0.3, 0.02
BLOCK = 10  # calls of one engine in a row (the blocks measure)


def make_ir(model: str, out_dir: str) -> str:
    """Our IR of `model` at batch 1 in out_dir."""
    if model == "relu":
        return infer.trivial_ir(out_dir)
    return infer.convert_ours(model, out_dir, model, 1)


def run_pair(xml: str, iterations: int, precision: str) -> None:
    """The plan and the daemon called alternately on one IR, in this process, both at
    `precision` ("default": the daemon's, bf16 where the CPU has it): prints JSON {plan,
    daemon: median s, extra: median paired difference s, plan_block: the plan's median
    in the blocks, threads: the daemon's (its load reply) and the plan's}."""
    from device_daemons.client import IECore
    from device_daemons.cpu.plan import ExecutionPlan
    from ir import read_ir
    network = read_ir(xml)
    inputs = {layer.name: np.random.default_rng(0).standard_normal(layer.outputs[0].dims).astype(np.float32)
              for layer in network.inputs()}
    hint = None if precision == "default" else precision
    plan = ExecutionPlan(network, precision=hint)
    ie = IECore(policy="auto")
    exec_net = ie.load_network(ie.read_network(model=xml), "CPU",
                               config={} if hint is None else {"INFERENCE_PRECISION_HINT": hint})
    for _ in range(max(20, iterations // 5)):  # warm-up (the client learns the daemon's compute time)
        plan.infer(inputs)
        exec_net.infer(inputs)
    plan_times, daemon_times = [], []
    for _ in range(iterations):
        start = time.perf_counter()
        plan.infer(inputs)
        middle = time.perf_counter()
        exec_net.infer(inputs)
        end = time.perf_counter()
        plan_times.append(middle - start)
        daemon_times.append(end - middle)
    block_extra, computes, daemon_blocks, plan_blocks = [], [], [], []
    for _ in range(max(1, iterations // BLOCK)):
        medians = []
        for daemon, fn in ((False, plan.infer), (True, exec_net.infer)):
            times = []
            for i in range(BLOCK):
                start = time.perf_counter()
                fn(inputs)
                times.append(time.perf_counter() - start)
                if daemon and i >= 2 and exec_net.compute_us is not None:
                    computes.append(exec_net.compute_us * 1e-6)  # (the daemon's, in its reply)
            medians.append(statistics.median(times[2:]))
        block_extra.append(medians[1] - medians[0])
        plan_blocks.append(medians[0])
        daemon_blocks.append(medians[1])
    threads = {"daemon": infer.daemon_threads(exec_net), "plan": plan.threads}  # (the team it measured faster)
    precisions = {"daemon": exec_net.get_config("INFERENCE_PRECISION_HINT"), "plan": plan.precision_used}
    status = ie._link("CPU").call("status")[0]
    ie.close()
    print(json.dumps({"plan": statistics.median(plan_times), "daemon": statistics.median(daemon_times),
                      "extra": statistics.median(d - p for d, p in zip(daemon_times, plan_times)),
                      "block_extra": statistics.median(block_extra),
                      "compute": statistics.median(computes) if computes else None,
                      "daemon_block": statistics.median(daemon_blocks),
                      "plan_block": statistics.median(plan_blocks),  # (the blocks' share divides by this)
                      "threads": threads, "precisions": precisions, "backend": plan.program.backend,
                      "local_share": status.get("local_requests", 0) / max(1, status["requests"])}))


WAYS = {"calls": ("extra", "plan"), "blocks": ("block_extra", "plan_block")}  # way: (its extra, its plan time)


def way_cells(model_runs: list, way: str) -> tuple[list, bool]:
    """(the table's cells of one way - extra ms, rounds, the plan's ms in that way, share -,
    goal met) for a network: the share is over that way's own median plan time (the
    blocks' plan runs back to back, the calls' after a daemon call: not the same figure)."""
    key, base = WAYS[way]
    plan = statistics.median(run[base] for run in model_runs)
    extra = statistics.median(run[key] for run in model_runs)
    ok = extra <= GOAL_MS * 1e-3 or extra <= GOAL_SHARE * plan
    spread = [run[key] * 1e3 for run in model_runs]
    return ["{:+.3f}{}".format(extra * 1e3, "" if ok else "!"), "{:.2f}..{:.2f}".format(min(spread), max(spread)),
            "{:.3f}".format(plan * 1e3), "{:.1f}%".format(100 * extra / plan)], ok


def setting(run: dict, key: str) -> str:
    """The daemon's thread count or precision (its load reply), the plan's beside it where it differs."""
    daemon, plan = run[key]["daemon"], run[key]["plan"]
    return str(daemon) if str(daemon) == str(plan) else "{}/plan {}".format(daemon, plan)


def report(models: list, runs: dict, args) -> None:
    """The table: a row per network."""
    print("daemon vs the same plan in-process, batch 1, --precision {}, synchronous requests; {} rounds x {} "
          "iterations each way (calls: alternate calls; blocks: {} calls of one, then of the other - the module doc); "
          "the median of the rounds' medians, min-max of the rounds; each way's share is over the plan's median "
          "in that way (blocks: its own plan ms column)".format(args.precision, args.rounds, args.iterations, BLOCK))
    print("{:<26}{:>9}{:>11}{:>11}{:>14}{:>8}{:>11}{:>14}{:>9}{:>8}{:>9}{:>8}{:>19}{:>7}{:>9}".format(
        "network", "plan ms", "daemon ms", "calls: ms", "rounds", "share", "blocks: ms", "rounds", "plan ms", "share",
        "compute", "trip", "threads", "prec", "carrier"))
    for model in models:
        plan, daemon = (statistics.median(run[k] for run in runs[model]) for k in ("plan", "daemon"))
        calls, blocks = way_cells(runs[model], "calls")[0], way_cells(runs[model], "blocks")[0]
        cells = calls[:2] + calls[3:] + blocks  # (the calls' plan ms is the first column)
        split = [(run["compute"], run["daemon_block"]) for run in runs[model] if run["compute"] is not None]
        compute, trip = (("{:.3f}".format(statistics.median(c for c, _ in split) * 1e3),
                          "{:.3f}".format(statistics.median(b - c for c, b in split) * 1e3)) if split else ("-", "-"))
        print("{:<26}{:>9.3f}{:>11.3f}{:>11}{:>14}{:>8}{:>11}{:>14}{:>9}{:>8}{:>9}{:>8}{:>19}{:>7}{:>8.0f}%".format(
            model, plan * 1e3, daemon * 1e3, *cells, compute, trip, setting(runs[model][0], "threads"),
            setting(runs[model][0], "precisions"), 100 * min(run["local_share"] for run in runs[model])))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precision", choices=("default", "f32"), default="default",
                        help="both engines' precision (default: the daemon's, bf16 where the CPU has it)")
    parser.add_argument("--xml", help=argparse.SUPPRESS)  # one measuring process
    args = parser.parse_args()
    if args.xml:
        run_pair(args.xml, args.iterations, args.precision)
        return 0
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit("unknown model(s) {}; choose from {}".format(", ".join(unknown), ", ".join(MODELS)))
    work = tempfile.mkdtemp(prefix="mo-daemon-overhead-")
    runs = {m: [] for m in models}
    loads = [os.getloadavg()[0]]
    try:
        xmls = {m: make_ir(m, work) for m in models}
        for r in range(args.rounds):
            for model in models:
                env = dict(os.environ, MO_CORE_RUNTIME_DIR=os.path.join(work, "rt-{}-{}".format(model, r)),
                           PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
                try:
                    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--xml", xmls[model],
                                           "--iterations", str(args.iterations), "--precision", args.precision],
                                          capture_output=True, text=True, env=env, cwd=ROOT, start_new_session=True)
                finally:
                    subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env,
                                   capture_output=True, cwd=ROOT)
                if proc.returncode:
                    raise SystemExit("{} failed:\n{}".format(model, proc.stderr[-3000:]))
                runs[model].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            loads.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(models, runs, args)
    met = {way: all(way_cells(runs[m], way)[1] for m in models) for way in WAYS}
    print("goal: the daemon adds <= {} ms or <= {:.0f}% over the plan in-process on every network (! marks a miss): "
          "calls {}, blocks {}; load average during the runs {:.2f}-{:.2f} (os.getloadavg, 1 min), {} CPUs; carrier: "
          "the share of the daemon's requests that came over its local carrier; compute: the daemon's own "
          "timing of the computation in its blocks (the median of what its replies said, ms); trip: the rest of a "
          "daemon call there (its block median minus its compute: the round trip); threads, prec: the daemon's "
          "(its load reply, and the team size it measured faster where that is one thread: '2 (1 used)'; the plan's "
          "after a slash where they differ)".format(
              GOAL_MS, 100 * GOAL_SHARE, "met" if met["calls"] else "NOT met", "met" if met["blocks"] else "NOT met",
              min(loads), max(loads), len(os.sched_getaffinity(0))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
