"""TensorFlow Object Detection API exports: conversion time and latency against OpenVINO.

Models: the ssd_mobilenet_v2 and faster_rcnn_inception_v2 exports of the OD API 2.8
code base that tests/tf/odapi builds (benchmarks/odapi_exports.py: small configs, built
once, cached). Same frozen graph, pipeline.config and support JSON for every tool:

- conversion: `mo-core convert` (IR v2, and --ir_version 11) vs `mo` of
  openvino-dev 2024.6 (its own venv, benchmarks/references.py) with its own
  *_support_api_v1.15.json; each run a fresh process, runs interleaved, medians;
- latency (batch 1, f32, the fixed image of the tests): the CPU daemon on our IR v2,
  the OpenVINO runtime of this venv on mo's IR (its input stays NHWC: fed the same
  image in that layout) and on our IR v11 (LATENCY hint, f32); rounds interleaved,
  each engine alone in a process of its own per round (the median of its `iterations`
  runs), medians over the rounds. Our and mo's IR must
  find the same detections above 0.3 (benchmarks/odapi_exports.py: unpaired).

The goals of issue 23: convert in <= 1/10 of mo's time; latency <= 1.0x OpenVINO on
mo's IR. The machine load is printed with the figures.

    python benchmarks/odapi.py [--models ssd_mobilenet_v2,faster_rcnn_inception_v2] [--runs 3] [--iterations 20]
"""
import argparse
import glob
import os
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
from benchmarks.timing import measure  # noqa: E402

JSON = {"ssd": "ssd_support_api_v1.15.json", "faster_rcnn": "faster_rcnn_support_api_v1.15.json"}


def timed(cmd) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
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
            ("mo-core convert (IR v11)", ours + ["--output_dir", os.path.join(out, "v11"), "--ir_version", "11"]),
            ("openvino-dev 2024.6 mo", [openvino_mo(tensorflow=True), "--input_model", graph,
                                        "--transformations_config", mo_json(JSON[arch]),
                                        "--tensorflow_object_detection_api_pipeline_config", config,
                                        "--output_dir", os.path.join(out, "mo"), "--model_name", "model",
                                        "--compress_to_fp16=False", "--silent"] + shape)]


WARMUP = 5  # untimed runs of each engine in its process
DAEMON = "mo-core CPU daemon (IR v2)"
ENGINES = ("OpenVINO runtime on mo's IR", "OpenVINO runtime on our IR v11", DAEMON)


def run_engine(name: str, out: str, iterations: int) -> None:
    """One engine alone in this process (another engine's threads - OpenVINO's spin after
    its requests - would take the cores from the next one's): its warm-up, its detections
    saved beside the IRs, WARMUP runs, then the median ms of `iterations` runs as JSON."""
    import json

    import numpy as np
    image = np.load(os.path.join(out, "image.npy"))
    nchw = np.ascontiguousarray(image.astype(np.float32).transpose(0, 3, 1, 2))
    if name.startswith("OpenVINO"):
        import openvino as ov
        xml = os.path.join(out, "mo" if "mo's" in name else "v11", "model.xml")
        compiled = ov.Core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                        "PERFORMANCE_HINT": "LATENCY"})
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

        def run():
            return next(iter(exec_net.infer({"image_tensor": nchw}).values()))

        def close():
            exec_net.close()
            ie.close()
    try:
        np.save(os.path.join(out, "detections-{}.npy".format(ENGINES.index(name))), np.asarray(run()))
        # (WARMUP untimed runs, every engine alike: first-run costs, the client learning the daemon's time)
        median, _ = measure(run, iterations, warmup=WARMUP - 1)
        print(json.dumps({"ms": median * 1000}))
    finally:
        if close is not None:
            close()


def latency(out: str, image, iterations: int, rounds: int) -> dict:
    """Median ms per engine: `rounds` rounds, each engine in a process of its own per round."""
    import json

    import numpy as np
    np.save(os.path.join(out, "image.npy"), image)
    times = {name: [] for name in ENGINES}
    # a private daemon of this tree's code (a user's daemon may run other code), stopped after each run
    env = dict(os.environ, PYTHONPATH=REPO, MO_CORE_RUNTIME_DIR=os.path.join(out, "rt"))
    for _ in range(rounds):
        for name in ENGINES:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--engine", name, "--out", out,
                                   "--iterations", str(iterations)], capture_output=True, text=True, cwd=REPO, env=env)
            subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env, capture_output=True,
                           cwd=REPO)
            if proc.returncode != 0:
                raise SystemExit("{} failed:\n{}".format(name, (proc.stdout + proc.stderr)[-3000:]))
            times[name].append(json.loads(proc.stdout.strip().splitlines()[-1])["ms"])
    ours = np.load(os.path.join(out, "detections-{}.npy".format(ENGINES.index(DAEMON))))
    for i, name in enumerate(ENGINES[:2]):
        theirs = np.load(os.path.join(out, "detections-{}.npy".format(i)))
        problems = unpaired(ir_detections(ours), ir_detections(theirs))
        if problems:
            print("[ WARNING ] {} finds other detections than the CPU daemon: {}".format(name, problems[:3]))
    return {name: statistics.median(v) for name, v in times.items()}


def bench(exports, model: str, runs: int, iterations: int) -> None:
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
        lat = latency(out, exports.tf_out(model)["image"], iterations, max(3, runs))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print("\nmodel: {} (OD API 2.8 export, {:.1f} MB), {} conversion runs each (fresh processes), load average "
          "{:.2f}".format(model, os.path.getsize(exports.graph(model)) / 1e6, runs, statistics.mean(load)))
    print("{:<32}{:>10}{:>10}{:>10}".format("converter", "median s", "min s", "max s"))
    for name, values in times.items():
        print("{:<32}{:>10.2f}{:>10.2f}{:>10.2f}".format(name, statistics.median(values), min(values), max(values)))
    ratio = statistics.median(times["mo-core convert (IR v2)"]) / statistics.median(times["openvino-dev 2024.6 mo"])
    print("ratio mo-core (IR v2) / mo: {:.3f} (goal <= 0.1: {})".format(ratio, "met" if ratio <= 0.1 else "NOT met"))
    print("{:<32}{:>12}".format("engine (batch 1, f32)", "median ms"))
    for name, ms in lat.items():
        print("{:<32}{:>12.2f}".format(name, ms))
    ratio = lat[DAEMON] / lat["OpenVINO runtime on mo's IR"]
    print("ratio CPU daemon / OpenVINO on mo's IR: {:.2f}x (goal <= 1.0x: {}), load average now {:.2f}".format(
        ratio, "met" if ratio <= 1.0 else "NOT met", os.getloadavg()[0]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="ssd_mobilenet_v2,faster_rcnn_inception_v2")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)  # (one engine, in a child process)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        run_engine(args.engine, args.out, args.iterations)
        return
    exports = built(("2.8",))["2.8"]
    for model in args.models.split(","):
        bench(exports, model, args.runs, args.iterations)


if __name__ == "__main__":
    main()
