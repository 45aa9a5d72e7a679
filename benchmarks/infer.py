"""Inference latency at batch 1 on one model, every engine in the same run:

- mo-core CPU daemon, end to end through ZeroMQ (IECore, a private daemon)
- the same execution plan in-process (no daemon)
- pycaffe
- OpenCV DNN 4.x (readNetFromCaffe)
- the OpenVINO 2024.6 runtime, f32, on the IR its own `mo` makes from the model
- the current OpenVINO runtime (the project's venv), f32, on mo-core's IR v11
  (`--ir_version 11`) and on that same `mo` IR: the same runtime on both IRs
plus the daemon's round-trip cost for a 1x3x224x224 input on a trivial network
(Input -> ReLU), daemon minus in-process.

    python benchmarks/infer.py [--model bvlc_googlenet] [--iterations 100]
    python benchmarks/infer.py --overhead [--rounds 5] [--iterations 2000]

Runs are interleaved engine by engine after a warm-up; medians are printed with
ratios. All engines use the machine's cores as they do by default.

--overhead measures only the daemon's round trip (no reference engine, no model
to convert): Input -> ReLU on 1x3x224x224, in-process vs the daemon through its
fast lane (the default for such a network) vs the daemon without the fast lane
(MO_CORE_FAST_LANE_US=0: the main socket and the worker pool), each in its own
process with a private daemon, in `--rounds` interleaved rounds; it prints the
median of the rounds' medians (the machine may be shared: look at the spread).
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.references import HOME, bvlc_model, openvino_mo, openvino_python  # noqa: E402

OPENVINO_SCRIPT = r"""
import json, sys, time, statistics
import numpy as np
import openvino as ov
xml, iterations = sys.argv[1], int(sys.argv[2])
save = sys.argv[3] if len(sys.argv) > 3 else None  # the f32 run's first output goes there
core = ov.Core()
result = {"version": ov.__version__.split("-")[0]}
result["input"] = list(core.read_model(xml).inputs[0].get_shape())
# f32 is the comparison the targets name; the runtime's own default (bf16 on CPUs
# that have it) is reported beside it
for key, config in (("f32", {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"}),
                    ("default", {"PERFORMANCE_HINT": "LATENCY"})):
    model = core.compile_model(xml, "CPU", config)
    request = model.create_infer_request()
    x = np.random.default_rng(0).standard_normal(tuple(model.inputs[0].shape)).astype(np.float32)
    for _ in range(10):
        request.infer({0: x})
    times = []
    for _ in range(iterations):
        t = time.perf_counter(); request.infer({0: x}); times.append(time.perf_counter() - t)
    if save and key == "f32":
        np.save(save, request.infer({0: x})[0])
    precision = model.get_property("INFERENCE_PRECISION_HINT")
    result[key] = [statistics.median(times), min(times), getattr(precision, "get_type_name", lambda: str(precision))()]
print(json.dumps(result))
"""


def measure(fn, iterations, warmup=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def convert_ours(proto, weights, out_dir, *options):
    subprocess.run([sys.executable, "-m", "cli", "convert", "--input_model", weights, "--input_proto", proto,
                    "-b", "1", "--output_dir", out_dir, "--model_name", "model", "--silent", *options], check=True)
    return os.path.join(out_dir, "model.xml")


def run_openvino(python, xml, iterations, save=None):
    proc = subprocess.run([python, "-c", OPENVINO_SCRIPT, xml, str(iterations)] + ([save] if save else []),
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit("OpenVINO ({}) on {} failed:\n{}".format(python, xml, proc.stderr[-3000:]))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def openvino_ir(model, proto, weights, shape):
    # the input shape of ours (batch 1; the sdist's deploy nets say 10, and mo's -b
    # refuses a shape the model defines)
    out = os.path.join(HOME, "bench-models", "openvino-{}-{}".format(model, "x".join(map(str, shape))))
    xml = os.path.join(out, model + ".xml")
    if not os.path.isfile(xml):
        subprocess.run([openvino_mo(), "--input_model", weights, "--input_proto", proto, "--output_dir", out,
                        "--input_shape", "[{}]".format(",".join(map(str, shape))), "--compress_to_fp16=False",
                        "--silent"], check=True, capture_output=True)
    return xml


def trivial_ir(out_dir):
    from ir import Edge, Layer, Network, Port, write_ir
    dims = (1, 3, 224, 224)
    net = Network(name="relu", layers=[Layer(0, "data", "Input", outputs=[Port(0, dims)]),
                                       Layer(1, "relu", "ReLU", inputs=[Port(0, dims)], outputs=[Port(1, dims)])],
                  edges=[Edge(0, 0, 1, 0)])
    xml = os.path.join(out_dir, "relu.xml")
    write_ir(net, xml)
    return xml


def run_engine(engine, model, iterations, xml, relu_xml):
    """One engine, measured alone in this process (prints JSON)."""
    os.environ.setdefault("GLOG_minloglevel", "2")
    proto, weights = bvlc_model(model)
    from ir import read_ir
    network = read_ir(xml)
    shape = tuple(network.inputs()[0].outputs[0].dims)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    name = network.inputs()[0].name
    result = {}
    if engine == "daemon":
        from device_daemons.client import IECore
        ie = IECore(policy="auto")
        exec_net = ie.load_network(ie.read_network(model=xml), "CPU")
        result["main"] = measure(lambda: exec_net.infer({name: x}), iterations)
        relu_net = ie.load_network(ie.read_network(model=relu_xml), "CPU")
        t = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
        result["relu"] = measure(lambda: relu_net.infer({"data": t}), 500)
    elif engine == "plan":
        from device_daemons.cpu.plan import ExecutionPlan
        plan = ExecutionPlan(network)
        result["main"] = measure(lambda: plan.infer({name: x}), iterations)
        relu_plan = ExecutionPlan(read_ir(relu_xml))
        t = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
        result["relu"] = measure(lambda: relu_plan.infer({"data": t}), 500)
    elif engine == "pycaffe":
        import caffe
        net = caffe.Net(proto, weights, caffe.TEST)
        net.blobs[net.inputs[0]].reshape(*x.shape)  # batch 1 like the others (the deploy nets say 10)
        net.reshape()
        net.blobs[net.inputs[0]].data[...] = x
        result["main"] = measure(net.forward, iterations)
    elif engine == "opencv":
        import cv2
        cv_net = cv2.dnn.readNetFromCaffe(proto, weights)
        cv_net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
        cv_net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)

        def cv_forward():
            cv_net.setInput(x)
            cv_net.forward()
        result["main"] = measure(cv_forward, iterations)
        result["version"] = cv2.__version__
    print(json.dumps(result))


def run_round_trip(engine, iterations, relu_xml):
    """One variant of the round-trip measurement, alone in this process (prints JSON)."""
    t = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    if engine == "plan":
        from device_daemons.cpu.plan import ExecutionPlan
        from ir import read_ir
        plan = ExecutionPlan(read_ir(relu_xml))
        fn = lambda: plan.infer({"data": t})  # noqa: E731
    else:
        from device_daemons.client import IECore
        ie = IECore(policy="auto")
        relu_net = ie.load_network(ie.read_network(model=relu_xml), "CPU")
        fn = lambda: relu_net.infer({"data": t})  # noqa: E731
    status = (lambda: ie._link("CPU").call("status")[0]["fast_requests"]) if engine != "plan" else (lambda: 0)
    for _ in range(200):  # warm-up (and the client measures the network: it picks the lane)
        fn()
    before = status()
    median, fastest = measure(fn, iterations, warmup=0)
    # the share of the measured requests the daemon served on its fast lane
    print(json.dumps([median, fastest, (status() - before) / iterations]))


def overhead(rounds: int, iterations: int) -> None:
    variants = [("plan", "in-process (ExecutionPlan)", {}),
                ("daemon-fast", "daemon, fast lane", {}),
                ("daemon-pool", "daemon, main socket + pool", {"MO_CORE_FAST_LANE_US": "0"})]
    tmp = tempfile.mkdtemp(prefix="mo-overhead-")
    times = {key: [] for key, _, _ in variants}
    shares = {key: [] for key, _, _ in variants}
    try:
        relu_xml = trivial_ir(tmp)
        for r in range(rounds):
            for key, _, extra in variants:
                env = dict(os.environ, MO_CORE_RUNTIME_DIR=os.path.join(tmp, "rt-{}-{}".format(key, r)), **extra)
                try:
                    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--engine", key,
                                           "--iterations", str(iterations), "--relu-xml", relu_xml],
                                          capture_output=True, text=True, env=env)
                finally:
                    subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env,
                                   capture_output=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                if proc.returncode:
                    raise SystemExit("{} failed:\n{}".format(key, proc.stderr[-3000:]))
                median, _, fast_share = json.loads(proc.stdout.strip().splitlines()[-1])
                times[key].append(median)
                shares[key].append(fast_share)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    plan = statistics.median(times["plan"])
    print("daemon round trip, Input->ReLU 1x3x224x224 float32, {} rounds x {} iterations (median of the rounds' "
          "medians; min-max of the rounds)".format(rounds, iterations))
    print("{:<34}{:>10}{:>18}{:>14}{:>11}".format("variant", "median ms", "rounds min-max", "overhead ms",
                                                 "fast lane"))
    for key, label, _ in variants:
        m = statistics.median(times[key])
        print("{:<34}{:>10.3f}{:>18}{:>14}{:>10.0f}%".format(
            label, m * 1e3, "{:.3f}-{:.3f}".format(min(times[key]) * 1e3, max(times[key]) * 1e3),
            "" if key == "plan" else "{:.3f}".format((m - plan) * 1e3), 100 * statistics.mean(shares[key])))
    print("(the fast lane serves a network only while the daemon measures it below {} us: on a loaded machine a "
          "share of the requests goes to the pool)".format(os.environ.get("MO_CORE_FAST_LANE_US", "500")))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bvlc_googlenet")
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--overhead", action="store_true", help="only the daemon's round-trip cost")
    parser.add_argument("--rounds", type=int, default=5, help="with --overhead: interleaved rounds")
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--xml", help=argparse.SUPPRESS)
    parser.add_argument("--relu-xml", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine in ("plan", "daemon-fast", "daemon-pool") and args.xml is None:
        return run_round_trip(args.engine, args.iterations, args.relu_xml)
    if args.overhead:
        return overhead(args.rounds, args.iterations or 2000)
    args.iterations = args.iterations or 100
    if args.engine:
        return run_engine(args.engine, args.model, args.iterations, args.xml, args.relu_xml)
    proto, weights = bvlc_model(args.model)
    tmp = tempfile.mkdtemp(prefix="mo-infer-")
    env = dict(os.environ, MO_CORE_RUNTIME_DIR=os.path.join(tmp, "rt"), GLOG_minloglevel="2")
    results = {}
    try:
        xml = convert_ours(proto, weights, tmp)
        relu_xml = trivial_ir(tmp)
        # one engine at a time, each in a fresh process: no thread pools of one
        # engine spinning while another is measured
        for engine in ("daemon", "plan", "pycaffe", "opencv"):
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--engine", engine, "--model",
                                   args.model, "--iterations", str(args.iterations), "--xml", xml,
                                   "--relu-xml", relu_xml], capture_output=True, text=True, env=env)
            if proc.returncode:
                raise SystemExit("{} failed:\n{}".format(engine, proc.stderr[-3000:]))
            results[engine] = json.loads(proc.stdout.strip().splitlines()[-1])
            if engine == "daemon":
                subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env,
                               capture_output=True)
        from ir import read_ir
        shape = read_ir(xml).inputs()[0].outputs[0].dims
        ov_xml = openvino_ir(args.model, proto, weights, shape)
        ov = run_openvino(openvino_python(), ov_xml, args.iterations)
        if tuple(ov["input"]) != tuple(shape):
            raise SystemExit("not the same work: mo's IR {} has input {}, ours {}".format(ov_xml, ov["input"], shape))
        results["openvino"] = {"main": ov["f32"][:2], "version": ov["version"]}
        results["openvino_default"] = {"main": ov["default"][:2], "precision": ov["default"][2]}
        # the current runtime on our IR v11 and on mo's IR: same runtime, same weights and input
        v11_xml = convert_ours(proto, weights, os.path.join(tmp, "v11"), "--ir_version", "11")
        outs = [os.path.join(tmp, name + ".npy") for name in ("v11", "mo")]
        for key, xml_path, save in (("ov_v11", v11_xml, outs[0]), ("ov_mo", ov_xml, outs[1])):
            run = run_openvino(sys.executable, xml_path, args.iterations, save)
            results[key] = {"main": run["f32"][:2], "version": run["version"]}
            if run["input"] != ov["input"]:
                raise SystemExit("not the same work: inputs {} and {}".format(run["input"], ov["input"]))
        a, b = (np.load(path).astype(np.float64) for path in outs)
        agreement = float(np.abs(a - b).max() / np.abs(b).max())
    finally:
        subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)

    labels = [("daemon", "mo-core CPU daemon (ZeroMQ)"), ("plan", "mo-core plan in-process"), ("pycaffe", "pycaffe"),
              ("opencv", "OpenCV DNN " + results["opencv"].get("version", "")),
              ("openvino", "OpenVINO {} f32, mo's IR".format(results["openvino"]["version"])),
              ("ov_mo", "OpenVINO {} f32, mo's IR".format(results["ov_mo"]["version"])),
              ("ov_v11", "OpenVINO {} f32, IR v11 ours".format(results["ov_v11"]["version"])),
              ("openvino_default", "OpenVINO default ({})".format(results["openvino_default"]["precision"]))]
    ov_median = results["openvino"]["main"][0]
    print("model: {}, input {} (batch 1), FP32 weights, N(0, 1) from seed 0, {} iterations each, every engine "
          "alone in its own process".format(args.model, "x".join(map(str, ov["input"])), args.iterations))
    print("{:<40}{:>10}{:>10}{:>12}".format("engine", "median ms", "min ms", "vs OpenVINO"))
    for key, label in labels:
        median, fastest = results[key]["main"]
        print("{:<40}{:>10.2f}{:>10.2f}{:>11.2f}x".format(label, median * 1e3, fastest * 1e3, median / ov_median))
    print("IR v11 ours vs mo's IR on OpenVINO {} (f32): outputs agree to {:.2g} (max |diff| / max |mo's|); "
          "latency ratio {:.2f}".format(results["ov_v11"]["version"], agreement,
                                        results["ov_v11"]["main"][0] / results["ov_mo"]["main"][0]))
    d, p = results["daemon"]["relu"][0], results["plan"]["relu"][0]
    print("daemon round trip, 1x3x224x224 Input->ReLU: daemon {:.3f} ms, in-process {:.3f} ms, overhead {:.3f} ms "
          "(target < 0.3)".format(d * 1e3, p * 1e3, (d - p) * 1e3))
    ours = results["daemon"]["main"][0]
    print("targets: daemon within 1.5x of OpenVINO: {}; faster than pycaffe: {}; faster than OpenCV: {}".format(
        "met" if ours <= 1.5 * ov_median else "NOT met ({:.2f}x)".format(ours / ov_median),
        "met" if ours < results["pycaffe"]["main"][0] else "NOT met",
        "met" if ours < results["opencv"]["main"][0] else "NOT met"))


if __name__ == "__main__":
    main()
