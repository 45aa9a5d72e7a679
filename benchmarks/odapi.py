"""TensorFlow Object Detection API exports: conversion time and latency against OpenVINO.

Models: the ssd_mobilenet_v2 and faster_rcnn_inception_v2 exports of the OD API 2.8
code base that tests/tf/odapi builds (benchmarks/odapi_exports.py: small configs, built
once, cached). Same frozen graph, pipeline.config and support JSON for every tool:

- conversion: `mo-core convert` (IR v2, and --ir_version 11) vs `mo` of
  openvino-dev 2024.6 (its own venv, benchmarks/references.py) with its own
  *_support_api_v1.15.json; each run a fresh process in a session of its own,
  runs interleaved, medians; the ratio compares the same IR version (ours
  --ir_version 11 against mo's, checked; IR v2 is printed beside);
- latency (batch 1, f32, the fixed image of the tests): the CPU daemon on our IR v2,
  the OpenVINO runtime of this venv on mo's IR (its input stays NHWC: fed the same
  image in that layout) and on our IR v11 (LATENCY hint, f32); rounds interleaved,
  each engine alone in a process (and session, as the daemon has) of its own per
  round (the median of its `iterations` runs), medians over the rounds; each
  engine's precision and threads printed as it reports them. The IRs must find the
  same detections above 0.3 (benchmarks/odapi_exports.py: unpaired), else the
  latency verdict is "not comparable".

The goals of issue 23: convert in <= 1/10 of mo's time; latency <= 1.0x OpenVINO on
mo's IR. The machine load is printed with the figures.

    python benchmarks/odapi.py [--models ssd_mobilenet_v2,faster_rcnn_inception_v2] [--runs 3] [--iterations 20]
                               [--interleave N [--cycles 20]]

--interleave N: the three latency engines loaded side by side take turns of one untimed
and N timed requests, --cycles cycles (benchmarks/timing.py says why: on a small VM
engines timed one after the other land in different phases of the machine's speed);
the verdict line adds the median and middle half of the per-cycle ratios.
"""
import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from benchmarks.references import OPENVINO_VENV, openvino_mo  # noqa: E402
from benchmarks.odapi_exports import MODELS, built, ir_detections, unpaired  # noqa: E402
from benchmarks.timing import interleaved, measure, paired, serve_turns  # noqa: E402
from device_daemons.cpu.plan_pool import CHOICE_REQUESTS  # noqa: E402

JSON = {"ssd": "ssd_support_api_v1.15.json", "faster_rcnn": "faster_rcnn_support_api_v1.15.json"}
OURS_V11, MO = "mo-core convert (IR v11)", "openvino-dev 2024.6 mo"


def timed(cmd) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO),
                          start_new_session=True)  # (every tool alike: see latency())
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit("command failed: {}\n{}".format(" ".join(cmd), (proc.stdout + proc.stderr)[-3000:]))
    return elapsed


def mo_json(name: str) -> str:
    found = glob.glob(os.path.join(OPENVINO_VENV, "lib", "python3*", "site-packages", "openvino", "tools", "mo",
                                   "front", "tf", name))
    if not found:
        raise SystemExit("mo's {} is missing in {}".format(name, OPENVINO_VENV))
    return found[0]


def commands(exports, model: str, out: str) -> list:
    arch = "faster_rcnn" if model.startswith("faster_rcnn") else "ssd"
    graph, config = exports.graph(model), exports.pipeline(model)
    shape = ["--input_shape", "[1,{},{},3]".format(*MODELS[model]["image"])] if arch == "faster_rcnn" else []
    ours = [sys.executable, "-m", "cli", "convert", "--input_model", graph, "--transformations_config",
            os.path.join(REPO, "core", "front", "tf", "object_detection", "support", JSON[arch]),
            "--tensorflow_object_detection_api_pipeline_config", config, "--model_name", "model", "--silent"] + shape
    return [("mo-core convert (IR v2)", ours + ["--output_dir", os.path.join(out, "v2")]),
            (OURS_V11, ours + ["--output_dir", os.path.join(out, "v11"), "--ir_version", "11"]),
            (MO, [openvino_mo(tensorflow=True), "--input_model", graph,
                  "--transformations_config", mo_json(JSON[arch]),
                  "--tensorflow_object_detection_api_pipeline_config", config,
                  "--output_dir", os.path.join(out, "mo"), "--model_name", "model",
                  "--compress_to_fp16=False", "--silent"] + shape)]


WARMUP = 5  # untimed runs of each engine in its process
DAEMON = "mo-core CPU daemon (IR v2)"
ENGINES = ("OpenVINO runtime on mo's IR", "OpenVINO runtime on our IR v11", DAEMON)


def run_engine(name: str, out: str, iterations: int, turns: bool = False) -> None:
    """One engine alone in this process (another engine's threads - OpenVINO's spin after
    its requests - would take the cores from the next one's): its warm-up, its detections
    saved beside the IRs, WARMUP runs, then the median ms of `iterations` runs as JSON;
    `turns`: timed in the turns that latency() gives it (timing.serve_turns) instead."""
    import json

    import numpy as np
    image = np.load(os.path.join(out, "image.npy"))
    nchw = np.ascontiguousarray(image.astype(np.float32).transpose(0, 3, 1, 2))
    if name.startswith("OpenVINO"):
        import openvino as ov
        xml = os.path.join(out, "mo" if "mo's" in name else "v11", "model.xml")
        compiled = ov.Core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                        "PERFORMANCE_HINT": "LATENCY"})
        precision = compiled.get_property("INFERENCE_PRECISION_HINT")
        settings = {"precision": getattr(precision, "get_type_name", lambda: str(precision))(),
                    "threads": int(compiled.get_property("INFERENCE_NUM_THREADS"))}
        request = compiled.create_infer_request()
        feed = {}
        for port in compiled.inputs:
            shape = list(port.get_partial_shape().to_shape())
            if len(shape) == 2:   # mo's Faster R-CNN IR: a second input, image_info [1, 3]
                feed[port] = np.array([[image.shape[1], image.shape[2], 1]], np.float32)
            else:                 # mo 2024 keeps the image NHWC
                feed[port] = np.ascontiguousarray(image.astype(np.float32)) if shape[-1] == 3 else nchw
        close = None

        def run():  # -> the first output (the detections)
            return next(iter(request.infer(feed).values()))
    else:
        from device_daemons.client import IECore
        ie = IECore()
        exec_net = ie.load_network(ie.read_network(model=os.path.join(out, "v2", "model.xml")), "CPU",
                                   config={"INFERENCE_PRECISION_HINT": "f32"})  # f32 as OpenVINO's rows
        settings = {"precision": exec_net.get_config("INFERENCE_PRECISION_HINT"),
                    "threads": exec_net.get_config("INFERENCE_NUM_THREADS")}

        def run():
            return next(iter(exec_net.infer({"image_tensor": nchw}).values()))

        def close():
            exec_net.close()
            ie.close()
    try:
        np.save(os.path.join(out, "detections-{}.npy".format(ENGINES.index(name))), np.asarray(run()))
        # (WARMUP untimed runs, every engine alike: first-run costs, the client learning the daemon's time; the
        # daemon's also past its team choice, which measures its first requests on both team sizes: plan_pool.py)
        warmup = WARMUP - 1 + (CHOICE_REQUESTS if name == DAEMON else 0)
        if turns:
            timed = serve_turns(run, warmup)
            result = {"ms": timed["main"][0] * 1000, "turns": timed["turns"]}
        else:
            result = {"ms": measure(run, iterations, warmup=warmup)[0] * 1000}
        print(json.dumps(dict(settings, **result)))
    finally:
        if close is not None:
            close()


def latency(out: str, image, iterations: int, rounds: int, interleave: int = 0) -> tuple[dict, dict, list]:
    """({engine: median ms}, {engine: its precision and threads}, the detections' problems):
    `rounds` rounds, each engine in a process of its own per round; with `interleave` N, the
    engines loaded side by side take `rounds` cycles of turns of N timed requests
    (timing.Turns; their settings then hold each turn's median, "turns")."""
    import json

    import numpy as np
    np.save(os.path.join(out, "image.npy"), image)
    times = {name: [] for name in ENGINES}
    settings = {}
    # a private daemon of this tree's code (a user's daemon may run other code), stopped after each run
    env = dict(os.environ, PYTHONPATH=REPO, MO_CORE_RUNTIME_DIR=os.path.join(out, "rt"))
    if interleave:
        commands = {name: [sys.executable, os.path.abspath(__file__), "--engine", name, "--out", out, "--turns"]
                    for name in ENGINES}
        try:
            settings = interleaved(commands, env, REPO, rounds, interleave)
        finally:
            subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env, capture_output=True,
                           cwd=REPO)
        return ({name: s.pop("ms") for name, s in settings.items()}, settings, detection_problems(out))
    for r in range(rounds):
        for name in ENGINES[::-1] if r % 2 else ENGINES:  # (no engine always first)
            # a session of its own, as the daemon has (core/microkernel/launcher.py): with autogroup
            # scheduling an engine left in this benchmark's session would share its group's CPU share
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--engine", name, "--out", out,
                                   "--iterations", str(iterations)], capture_output=True, text=True, cwd=REPO, env=env,
                                  start_new_session=True)
            subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env, capture_output=True,
                           cwd=REPO)
            if proc.returncode != 0:
                raise SystemExit("{} failed:\n{}".format(name, (proc.stdout + proc.stderr)[-3000:]))
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            times[name].append(result.pop("ms"))
            settings[name] = result
    return {name: statistics.median(v) for name, v in times.items()}, settings, detection_problems(out)


def detection_problems(out: str) -> list:
    """Where the OpenVINO rows' detections differ from the CPU daemon's (empty: the same work)."""
    import numpy as np
    ours = np.load(os.path.join(out, "detections-{}.npy".format(ENGINES.index(DAEMON))))
    problems = []
    for i, name in enumerate(ENGINES[:2]):
        theirs = np.load(os.path.join(out, "detections-{}.npy".format(i)))
        problems += ["{}: {}".format(name, p) for p in unpaired(ir_detections(ours), ir_detections(theirs))]
    return problems


def ir_version(xml: str) -> str:
    """The version attribute of an IR's <net>."""
    with open(xml) as f:
        found = re.search(r'<net\b[^>]*\bversion="(\d+)"', f.read(4096))
    return "v" + found.group(1) if found else "?"


def conversion_verdict(times: dict, out: str) -> str:
    """Ours against mo at the same IR version (mo writes v11: ours with --ir_version 11)."""
    ours, theirs = ir_version(os.path.join(out, "v11", "model.xml")), ir_version(os.path.join(out, "mo", "model.xml"))
    if ours != theirs:
        return "not comparable: mo-core wrote IR {}, mo IR {}".format(ours, theirs)
    ratio = statistics.median(times[OURS_V11]) / statistics.median(times[MO])
    return "ratio mo-core (IR {}) / mo (IR {}): {:.3f} (goal <= 0.1: {})".format(
        ours, theirs, ratio, "met" if ratio <= 0.1 else "NOT met")


def latency_verdict(lat: dict, problems: list, settings: dict) -> str:
    """The daemon against OpenVINO on mo's IR: not comparable unless the IRs find the same detections."""
    theirs = "OpenVINO runtime on mo's IR"
    ratio = lat[DAEMON] / lat[theirs]
    if problems:
        return "ratio CPU daemon / OpenVINO on mo's IR: {:.2f}x - not comparable: the IRs find different " \
               "detections ({} unpaired, e.g. {})".format(ratio, len(problems), "; ".join(problems[:2]))
    cycles = "; per cycle {}".format(paired(settings[DAEMON]["turns"], settings[theirs]["turns"])) \
        if "turns" in settings[DAEMON] else ""
    return "ratio CPU daemon / OpenVINO on mo's IR: {:.2f}x{} (goal <= 1.0x: {})".format(
        ratio, cycles, "met" if ratio <= 1.0 else "NOT met")


def bench(exports, model: str, runs: int, iterations: int, interleave: int = 0, cycles: int = 20) -> None:
    out = tempfile.mkdtemp(prefix="mo-odapi-bench-")
    try:
        tools = commands(exports, model, out)
        for _, cmd in tools:
            timed(cmd)
        times = {name: [] for name, _ in tools}
        load = []
        for _ in range(runs):
            for name, cmd in tools:
                load.append(os.getloadavg()[0])
                times[name].append(timed(cmd))
        conversion = conversion_verdict(times, out)
        lat, settings, problems = latency(out, exports.tf_out(model)["image"], iterations,
                                          cycles if interleave else max(3, runs), interleave)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print("\nmodel: {} (OD API 2.8 export, {:.1f} MB), {} conversion runs each (fresh processes), load average "
          "{:.2f}".format(model, os.path.getsize(exports.graph(model)) / 1e6, runs, statistics.mean(load)))
    print("{:<32}{:>10}{:>10}{:>10}".format("converter", "median s", "min s", "max s"))
    for name, values in times.items():
        print("{:<32}{:>10.2f}{:>10.2f}{:>10.2f}".format(name, statistics.median(values), min(values), max(values)))
    print(conversion)
    how = "loaded side by side, turns of {} requests, {} cycles".format(interleave, cycles) if interleave else \
        "one after the other"
    print("{:<32}{:>12}{:>11}{:>9}   (each in a process and session of its own, as the daemon; {})".format(
        "engine (batch 1)", "median ms", "precision", "threads", how))
    for name, ms in lat.items():
        print("{:<32}{:>12.2f}{:>11}{:>9}".format(name, ms, str(settings[name]["precision"]),
                                                  str(settings[name]["threads"])))
    print("{}, load average now {:.2f}".format(latency_verdict(lat, problems, settings), os.getloadavg()[0]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="ssd_mobilenet_v2,faster_rcnn_inception_v2")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--interleave", type=int, default=0, metavar="N",
                        help="the latency engines loaded side by side take turns of N timed requests, --cycles of "
                             "them (benchmarks/timing.py; default 0: each engine alone per round)")
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)  # (one engine, in a child process)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--turns", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        run_engine(args.engine, args.out, args.iterations, args.turns)
        return
    exports = built(("2.8",))["2.8"]
    for model in args.models.split(","):
        bench(exports, model, args.runs, args.iterations, args.interleave, args.cycles)


if __name__ == "__main__":
    main()
