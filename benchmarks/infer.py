"""Inference speed of mo-core's daemons next to the reference engines, with the
same work for every engine: the same weights (Caffe nets: He-scaled random
caffemodels made once by pycaffe; keras_resnet50: the frozen Keras ResNet50 graph
of tests/tf/keras_apps.py, seeded weights), the same random input (seed 0, made in
NCHW; engines that keep TensorFlow's NHWC layout get the same values transposed),
the same batch, float32.

    python benchmarks/infer.py [--models bvlc_googlenet,bvlc_alexnet,ssd_style,keras_resnet50]
                               [--batch 1] [--iterations 50] [--rounds 3] [--throughput]
                               [--gpu-iterations 10] [--opencl-rounds 1]
    python benchmarks/infer.py --overhead [--rounds 5] [--iterations 2000]

Engines (each alone in a fresh process; rounds interleave the engines so that a
change of the machine's load hits all of them alike):
- mo-core CPU daemon, end to end through ZeroMQ (IECore, a private daemon, its
  default backend: oneDNN where it runs a layer, numpy elsewhere)
- the mo-core execution plan in-process, oneDNN backend, and numpy backend (the reference)
- the framework: pycaffe, its input blob reshaped to the batch; TensorFlow running
  the frozen graph (keras_resnet50)
- OpenCV DNN 4.x (readNetFromCaffe / readNetFromTensorflow; a model it cannot read
  gets a row saying so)
- the OpenVINO 2024.6 runtime on the IR its own `mo` makes from the same files
  (--input_shape: ours; the deploy nets say batch 10; TensorFlow's NHWC for the
  Keras graph, which mo keeps), reshaped to the batch:
  INFERENCE_PRECISION_HINT f32 (the comparison the goals name) and its default
  precision (bf16 where the CPU has it: what its users get), LATENCY hint
- the current OpenVINO runtime (the project's venv), f32, on mo-core's IR v11
  (`--ir_version 11`) and on that same `mo` IR: the same runtime on both IRs, whose
  outputs must agree to 1e-4 (else the run stops)
- OpenCL rows: mo-core GPU daemon (a GPU, else PoCL on the CPU) through IECore, its
  GpuPlan in-process, and OpenCV DNN's OpenCL target (DNN_TARGET_OPENCL; on a
  non-GPU OpenCL device OpenCV refuses it unless OPENCV_DNN_OPENCL_ALLOW_ALL_DEVICES
  is set, which the benchmark does; its first run compiles OpenCV's kernels, which
  takes minutes on PoCL and is not timed). PoCL takes about a second a run here:
  these run --gpu-iterations times in --opencl-rounds rounds
Every engine's input shape is printed in the table and must be ours (else the run
stops). Latency: median of the iterations of a process, then the median over the
rounds (min: the fastest call).
--throughput: batch 8, two requests in flight: the daemon (IECore, 2 requests)
against OpenVINO's THROUGHPUT hint with 2 requests (f32); frames per second.
Round trip: the daemon's cost over in-process for a 1x3x224x224 Input -> ReLU net.
The load average is printed: numbers taken on a busy machine are not comparable.

--overhead measures only the daemon's round trip (no reference engine, no model
to convert): Input -> ReLU on 1x3x224x224, in-process vs the daemon through its
local carrier (the default for a local client: bound requests - 8-byte raw
datagrams, device_daemons/bound_protocol.py - over its Unix socket,
core/microkernel/direct.py) vs the fallback (MO_CORE_SHM=0: ZeroMQ to the main
socket and its worker pool, the arrays as frames), each in its own process (and
session) with a private daemon, in `--rounds` interleaved rounds; it prints the
median of the rounds' medians (the machine may be shared: look at the spread).
benchmarks/daemon_overhead.py measures the daemon against the same plan on real
networks.
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from benchmarks.references import HOME, bvlc_model, keras_model, openvino_mo, openvino_python  # noqa: E402

MODELS = ("bvlc_googlenet", "bvlc_alexnet", "ssd_style", "keras_resnet50")
KERAS = {"keras_resnet50": "resnet50"}  # benchmark name -> the graph of tests/tf/keras_apps.py
LATENCY_ENGINES = ("daemon", "onednn", "numpy", "pycaffe", "tensorflow", "opencv", "openvino_f32",
                   "openvino_default", "ov_mo", "ov_v11")
OPENCL_ENGINES = ("gpu_daemon", "gpu_plan", "opencv_ocl")
THROUGHPUT_ENGINES = ("daemon_tp", "openvino_tp")
LABELS = {"daemon": "mo-core CPU daemon (ZeroMQ)", "onednn": "mo-core plan, oneDNN backend",
          "numpy": "mo-core plan, numpy backend", "pycaffe": "pycaffe", "tensorflow": "TensorFlow {}",
          "opencv": "OpenCV DNN",
          "openvino_f32": "OpenVINO 2024.6 f32", "openvino_default": "OpenVINO 2024.6 default",
          "ov_mo": "OpenVINO {} f32, mo's IR", "ov_v11": "OpenVINO {} f32, IR v11 ours",
          "gpu_daemon": "mo-core GPU daemon (OpenCL)", "gpu_plan": "mo-core GPU plan in-process",
          "opencv_ocl": "OpenCV DNN {} OpenCL target",
          "daemon_tp": "mo-core CPU daemon, 2 requests", "openvino_tp": "OpenVINO THROUGHPUT hint f32"}

OPENVINO_SCRIPT = r"""
import json, sys, time, statistics
import numpy as np
import openvino as ov
xml, mode, batch, iterations, nireq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ours = json.loads(sys.argv[6])  # our IR's NCHW input shape at this batch: the input is made in it
save = sys.argv[7] if len(sys.argv) > 7 else None  # the first output goes there
core = ov.Core()
model = core.read_model(xml)
shape = list(model.inputs[0].partial_shape.to_shape())
shape[0] = batch
model.reshape({model.inputs[0].any_name: shape})
config = {"PERFORMANCE_HINT": "THROUGHPUT" if mode == "tp" else "LATENCY"}
if mode != "default":
    config["INFERENCE_PRECISION_HINT"] = "f32"
compiled = core.compile_model(model, "CPU", config)
x = np.random.default_rng(0).standard_normal(tuple(ours)).astype(np.float32)
if shape != ours:  # mo keeps a TensorFlow graph's NHWC: the same values, transposed
    if shape != [ours[0], ours[2], ours[3], ours[1]]:
        raise SystemExit("the IR's input {} is neither our {} nor its NHWC form".format(shape, ours))
    x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
precision = compiled.get_property("INFERENCE_PRECISION_HINT")
result = {"shape": shape, "precision": getattr(precision, "get_type_name", lambda: str(precision))(),
          "version": ov.__version__.split("-")[0]}
if mode == "tp":
    queue = ov.AsyncInferQueue(compiled, nireq)
    for _ in range(2 * nireq):
        queue.start_async({0: x})
    queue.wait_all()
    start = time.perf_counter()
    for _ in range(iterations):
        queue.start_async({0: x})
    queue.wait_all()
    result["fps"] = iterations * batch / (time.perf_counter() - start)
    result["nireq"] = nireq
    result["streams"] = int(compiled.get_property("NUM_STREAMS"))
else:
    request = compiled.create_infer_request()
    for _ in range(5):
        request.infer({0: x})
    times = []
    for _ in range(iterations):
        t = time.perf_counter(); request.infer({0: x}); times.append(time.perf_counter() - t)
    result["median"], result["min"] = statistics.median(times), min(times)
    if save:
        np.save(save, request.infer({0: x})[0])
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


def model_files(model):
    """What a model is made of: {"proto", "weights"} of a Caffe net, or {"pb", "io"} of
    a frozen TensorFlow graph (io: its inputs and outputs from the builder's index)."""
    if model in KERAS:
        pb = keras_model(KERAS[model])
        with open(os.path.join(os.path.dirname(pb), "index.json")) as f:
            return {"pb": pb, "io": json.load(f)[KERAS[model]]}
    proto, weights = bvlc_model(model)
    return {"proto": proto, "weights": weights}


def convert_ours(model, out_dir, name, batch, *options):
    files = model_files(model)
    source = ["--input_model", files["pb"]] if "pb" in files else ["--input_model", files["weights"],
                                                                   "--input_proto", files["proto"]]
    subprocess.run([sys.executable, "-m", "cli", "convert", *source, "-b", str(batch), "--output_dir", out_dir,
                    "--model_name", name, "--silent", *options], check=True)
    return os.path.join(out_dir, name + ".xml")


def nhwc(shape):
    return [shape[0], shape[2], shape[3], shape[1]]


def openvino_ir(model, shape):
    """mo's IR of the model at our input `shape` (the sdist's deploy nets say batch
    10, and mo's -b refuses a shape the model defines: --input_shape; a TensorFlow
    graph takes its own NHWC form of it)."""
    files = model_files(model)
    source = files.get("pb") or files["weights"]
    out = os.path.join(HOME, "bench-models", "openvino-{}-{}".format(model, "x".join(map(str, shape))))
    xml = os.path.join(out, model + ".xml")
    if not os.path.isfile(xml) or os.path.getmtime(xml) < os.path.getmtime(source):
        if "pb" in files:
            cmd = [openvino_mo(tensorflow=True), "--input_model", files["pb"], "--input_shape",
                   "[{}]".format(",".join(map(str, nhwc(shape))))]
        else:
            cmd = [openvino_mo(), "--input_model", files["weights"], "--input_proto", files["proto"], "--input_shape",
                   "[{}]".format(",".join(map(str, shape)))]
        subprocess.run(cmd + ["--output_dir", out, "--model_name", model, "--compress_to_fp16=False", "--silent"],
                       check=True, capture_output=True)
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


def relu_round_trip(infer):
    t = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    return measure(lambda: infer({"data": t}), 500)


def _opencv_forward(model, x, target):
    """A forward of OpenCV DNN's own backend on `target` (CPU or OpenCL) for input x
    (NCHW: OpenCV's TensorFlow importer takes NCHW blobs too)."""
    import cv2
    files = model_files(model)
    if "pb" in files:
        cv_net = cv2.dnn.readNetFromTensorflow(files["pb"])
    else:
        cv_net = cv2.dnn.readNetFromCaffe(files["proto"], files["weights"])
    cv_net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    cv_net.setPreferableTarget(target)

    def forward():
        cv_net.setInput(x)
        cv_net.forward()
    return forward


def run_engine(args):
    """One engine, measured alone in this process (prints JSON)."""
    os.environ.setdefault("GLOG_minloglevel", "2")
    engine = args.engine
    from ir import read_ir
    network = read_ir(args.xml)
    name = network.inputs()[0].name
    shape = tuple(network.inputs()[0].outputs[0].dims)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    result = {"shape": list(shape)}
    if engine in ("daemon", "daemon_tp"):
        from device_daemons.client import IECore
        ie = IECore(policy="auto")
        nireq = 2 if engine == "daemon_tp" else 1
        exec_net = ie.load_network(ie.read_network(model=args.xml), "CPU", num_requests=nireq)
        if engine == "daemon":
            result["main"] = measure(lambda: exec_net.infer({name: x}), args.iterations)
            relu_net = ie.load_network(ie.read_network(model=args.relu_xml), "CPU")
            result["relu"] = relu_round_trip(relu_net.infer)
        else:
            result["fps"] = daemon_fps(exec_net, name, x, args.iterations)
            result["nireq"] = nireq
    elif engine in ("onednn", "numpy"):
        from device_daemons.cpu.plan import ExecutionPlan
        plan = ExecutionPlan(network, backend=engine)
        result["main"] = measure(lambda: plan.infer({name: x}), args.iterations)
        result["relu"] = relu_round_trip(ExecutionPlan(read_ir(args.relu_xml), backend=engine).infer)
        result["native_layers"] = sum(len(s.layers) for s in plan.program.steps if s.backend == "onednn")
        result["numpy_layers"] = sum(1 for s in plan.program.steps if s.backend == "numpy")
        result["c_layers"] = sum(1 for s in plan.program.steps if s.backend == "native")
    elif engine == "gpu_daemon":
        from device_daemons.client import IECore
        ie = IECore(policy="auto", timeout=600)
        exec_net = ie.load_network(ie.read_network(model=args.xml), "GPU")
        result["main"] = measure(lambda: exec_net.infer({name: x}), args.gpu_iterations, warmup=2)
        result["device"] = _opencl_device_name()  # the same choice as the daemon (GPU, MO_CORE_OPENCL_DEVICE)
    elif engine == "gpu_plan":
        from device_daemons.gpu import GpuPlan
        plan = GpuPlan(network)
        result["main"] = measure(lambda: plan.infer({name: x}), args.gpu_iterations, warmup=2)
    elif engine == "opencv_ocl":
        import cv2
        result["version"] = cv2.__version__
        try:
            cv_forward = _opencv_forward(args.model, x, cv2.dnn.DNN_TARGET_OPENCL)
            cv_forward()  # compiles OpenCV's OpenCL kernels (minutes on PoCL): not timed
        except cv2.error as err:
            result["error"] = _opencv_error(err)
        else:
            result["main"] = measure(cv_forward, args.gpu_iterations, warmup=1)
        device = cv2.ocl.Device.getDefault()
        result["device"] = device.name() if cv2.ocl.useOpenCL() and device.name() else "none: ran on the CPU"
    elif engine == "tensorflow":
        result.update(shape=nhwc(shape), main=measure(_tensorflow_run(args.model, x), args.iterations))
        import tensorflow as tf
        result["version"] = tf.__version__
    elif engine == "pycaffe":
        import caffe
        files = model_files(args.model)
        net = caffe.Net(files["proto"], files["weights"], caffe.TEST)
        blob = net.inputs[0]
        net.blobs[blob].reshape(*shape)  # the batch of the others (the deploy nets say 10)
        net.reshape()
        net.blobs[blob].data[...] = x
        result["shape"] = list(net.blobs[blob].data.shape)
        result["main"] = measure(net.forward, args.iterations)
    elif engine == "opencv":
        import cv2
        result["version"] = cv2.__version__
        try:
            cv_forward = _opencv_forward(args.model, x, cv2.dnn.DNN_TARGET_CPU)
            cv_forward()
        except cv2.error as err:
            result["error"] = _opencv_error(err)
        else:
            result["main"] = measure(cv_forward, args.iterations)
    print(json.dumps(result))


def _opencv_error(err) -> str:
    """OpenCV's own words for a model it cannot read or run (the row says it)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return re.sub(r"^.*error: \([^)]*\) ", "", lines[-1])[:200] if lines else type(err).__name__


def _tensorflow_run(model, x):
    """TensorFlow running the frozen graph (a GraphDef session, as it was frozen) on
    x in its NHWC layout."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    files = model_files(model)
    graph_def = tf.compat.v1.GraphDef()
    with open(files["pb"], "rb") as f:
        graph_def.ParseFromString(f.read())
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    (input_name,) = files["io"]["inputs"]
    feed = {graph.get_tensor_by_name(input_name + ":0"): np.ascontiguousarray(x.transpose(0, 2, 3, 1))}
    fetch = [graph.get_tensor_by_name(name + ":0") for name in files["io"]["outputs"]]
    session = tf.compat.v1.Session(graph=graph)
    return lambda: session.run(fetch, feed)


def _has_opencl_gpu() -> bool:
    proc = subprocess.run([sys.executable, "-c", "from device_daemons.gpu import list_devices; "
                           "print(int(any(d.type & 4 for _, _, d in list_devices())))"],
                          capture_output=True, text=True, cwd=ROOT)
    return proc.stdout.strip() == "1"


def _opencl_device_name() -> str:
    from device_daemons.gpu import open_device
    return open_device("GPU").full_name


def daemon_fps(exec_net, name, x, iterations):
    """Frames per second with every request of exec_net kept busy by its own thread."""
    for request in exec_net.requests:
        request.infer({name: x})
    count = {"left": iterations}
    lock = threading.Lock()

    def loop(request):
        while True:
            with lock:
                if count["left"] <= 0:
                    return
                count["left"] -= 1
            request.infer({name: x})
    threads = [threading.Thread(target=loop, args=(r,)) for r in exec_net.requests]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return iterations * x.shape[0] / (time.perf_counter() - start)


def latency_engines(model):
    """The latency rows of a model: its framework is pycaffe or TensorFlow."""
    framework = "tensorflow" if model in KERAS else "pycaffe"
    return tuple(e for e in LATENCY_ENGINES if e not in ("pycaffe", "tensorflow") or e == framework)


def run_process(engine, model, xmls, relu_xml, batch, args, env, shape, save=None):
    """xmls: {"ours": our IR at this batch, "mo": mo's IR, "v11": our IR v11};
    shape: our IR's input shape at this batch (NCHW)."""
    iterations = args.iterations if batch == args.batch else max(20, args.iterations // 2)
    if engine.startswith("openvino") or engine.startswith("ov_"):
        mode = {"openvino_default": "default", "openvino_tp": "tp"}.get(engine, "f32")
        # ov_*: the current runtime of the project's venv; openvino_*: 2024.6 in its own venv
        python, ir = (sys.executable, xmls[engine[3:]]) if engine.startswith("ov_") else (openvino_python(), xmls["mo"])
        cmd = [python, "-c", OPENVINO_SCRIPT, ir, mode, str(batch), str(iterations), "2", json.dumps(list(shape))] + (
            [save] if save else [])
    else:
        cmd = [sys.executable, os.path.abspath(__file__), "--engine", engine, "--models", model, "--iterations",
               str(iterations), "--xml", xmls["ours"], "--relu-xml", relu_xml, "--gpu-iterations",
               str(args.gpu_iterations)]
    if engine == "opencv_ocl":
        env = dict(env, OPENCV_DNN_OPENCL_ALLOW_ALL_DEVICES="1")
        if not _has_opencl_gpu():
            env["OPENCV_OPENCL_DEVICE"] = ":CPU:"  # OpenCV looks for a GPU otherwise
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit("{} on {} failed:\n{}".format(engine, model, proc.stderr[-3000:]))
    if engine.startswith("daemon") or engine == "gpu_daemon":
        subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env, capture_output=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def combine(runs):
    """Several rounds of one engine -> one result: medians of the per-round figures."""
    out = dict(runs[0])
    for key in ("main", "relu"):
        if key in out:
            out[key] = (statistics.median(r[key][0] for r in runs), min(r[key][1] for r in runs))
    if "fps" in out:
        out["fps"] = statistics.median(r["fps"] for r in runs)
    if "median" in out:
        out["main"] = (statistics.median(r["median"] for r in runs), min(r["min"] for r in runs))
    return out


def verdict(ok, ratio):
    return "met" if ok else "NOT met ({:.2f}x)".format(ratio)


def report_latency(model, batch, iterations, rounds, res, gpu_iterations=0, opencl_rounds=0):
    ov = res["openvino_f32"]["main"][0]
    print()
    print("{}: batch {}, {} iterations x {} rounds per engine, each engine alone in its own process".format(
        model, batch, iterations, rounds))
    print("{:<36}{:<22}{:>10}{:>10}{:>14}".format("engine", "input shape", "median ms", "min ms", "vs OV f32"))
    for key in latency_engines(model) + tuple(k for k in OPENCL_ENGINES if k in res):
        r = res[key]
        label = LABELS[key]
        if key == "opencv":
            label += " " + r.get("version", "")
        if key == "openvino_default":
            label += " ({})".format(r.get("precision"))
        if key.startswith("ov_") or key in ("opencv_ocl", "tensorflow"):
            label = label.format(r.get("version"))
        if "error" in r:
            print("{:<36}{:<22}  cannot run it: {}".format(label, str(r["shape"]), r["error"]))
            continue
        median, fastest = r["main"]
        print("{:<36}{:<22}{:>10.2f}{:>10.2f}{:>13.2f}x".format(label, str(r["shape"]), median * 1e3,
                                                                fastest * 1e3, median / ov))
    if any(list(r.get("shape", ())) == nhwc(res["daemon"]["shape"]) for r in res.values() if isinstance(r, dict)):
        print("(an input [n, h, w, c] is the same input in TensorFlow's NHWC layout)")
    if "gpu_daemon" in res:
        print("OpenCL rows: device mo-core {}, OpenCV {}; {} runs x {} rounds each".format(
            res["gpu_daemon"]["device"], res["opencv_ocl"]["device"], gpu_iterations, opencl_rounds))
    plan = res["onednn"]
    print("oneDNN backend: {} layers on oneDNN, {} on our C kernels (device_daemons/cpu/native), {} on numpy".format(
        plan["native_layers"], plan.get("c_layers", 0), plan["numpy_layers"]))
    ours = res["daemon"]["main"][0]
    if "error" in res["opencv"]:  # nothing to be faster than: the goal is the OpenVINO one alone
        cv, cv_verdict = math.inf, "n/a (OpenCV DNN cannot read this model)"
    else:
        cv = res["opencv"]["main"][0]
        cv_verdict = verdict(ours < cv, ours / cv)
    print("goals ({}): daemon <= 1.2x OpenVINO f32: {}; daemon faster than OpenCV DNN: {}".format(
        model, verdict(ours <= 1.2 * ov, ours / ov), cv_verdict))
    print("IR v11 ours vs mo's IR on OpenVINO {} (f32): outputs agree to {:.2g} (max |diff| / max |mo's|, checked "
          "<= 1e-4); "
          "latency ratio {:.2f}".format(res["ov_v11"]["version"], res["agreement"],
                                        res["ov_v11"]["main"][0] / res["ov_mo"]["main"][0]))
    d, p = res["daemon"]["relu"][0], res["onednn"]["relu"][0]
    return ours <= 1.2 * ov and ours < cv, (d - p)


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
    def status():
        return 0 if engine == "plan" else ie._link("CPU").call("status")[0]["local_requests"]
    for _ in range(200):  # warm-up (and the client measures the network: it decides on polling)
        fn()
    before = status()
    median, fastest = measure(fn, iterations, warmup=0)
    after = status()
    # the share of the measured requests the daemon served on its local carrier
    print(json.dumps([median, fastest, (after - before) / iterations]))


def overhead(rounds: int, iterations: int) -> None:
    variants = [("plan", "in-process (ExecutionPlan)", {}),
                ("daemon-local", "daemon, local carrier (bound)", {}),
                ("daemon-fallback", "daemon, fallback (ZeroMQ, frames)", {"MO_CORE_SHM": "0"})]
    tmp = tempfile.mkdtemp(prefix="mo-overhead-")
    times = {key: [] for key, _, _ in variants}
    shares = {key: [] for key, _, _ in variants}
    try:
        relu_xml = trivial_ir(tmp)
        for r in range(rounds):
            for key, _, extra in variants:
                env = dict(os.environ, MO_CORE_RUNTIME_DIR=os.path.join(tmp, "rt-{}-{}".format(key, r)), **extra)
                try:
                    # a session of its own, as the daemon has: with autogroup scheduling a process
                    # of a busy session would get less CPU than the daemon it is compared with
                    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--engine", key,
                                           "--iterations", str(iterations), "--relu-xml", relu_xml],
                                          capture_output=True, text=True, env=env, start_new_session=True)
                finally:
                    subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env,
                                   capture_output=True, cwd=ROOT)
                if proc.returncode:
                    raise SystemExit("{} failed:\n{}".format(key, proc.stderr[-3000:]))
                median, _, local_share = json.loads(proc.stdout.strip().splitlines()[-1])
                times[key].append(median)
                shares[key].append(local_share)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    plan = statistics.median(times["plan"])
    print("daemon round trip, Input->ReLU 1x3x224x224 float32, {} rounds x {} iterations (median of the rounds' "
          "medians; min-max of the rounds)".format(rounds, iterations))
    print("{:<36}{:>10}{:>18}{:>14}{:>15}".format("variant", "median ms", "rounds min-max", "overhead ms",
                                                 "local carrier"))
    for key, label, _ in variants:
        m = statistics.median(times[key])
        print("{:<36}{:>10.3f}{:>18}{:>14}{:>14.0f}%".format(
            label, m * 1e3, "{:.3f}-{:.3f}".format(min(times[key]) * 1e3, max(times[key]) * 1e3),
            "" if key == "plan" else "{:.3f}".format((m - plan) * 1e3), 100 * statistics.mean(shares[key])))
    local = statistics.median(times["daemon-local"])
    print("goal: round-trip overhead <= 0.15 ms over in-process: {} ({:.3f} ms); load average {:.2f} {:.2f} {:.2f}".format(
        "met" if local - plan <= 0.15e-3 else "NOT met", (local - plan) * 1e3, *os.getloadavg()))
    print("(both sides poll for the next message before sleeping only while the CPUs are not contended: "
          "core/microkernel/spin.py)")


def same_work(model, res, shapes):
    """Stops the run unless every engine computed our input shape (its batch)."""
    for engine, r in res.items():
        want = list(shapes[engine])
        if isinstance(r, dict) and "shape" in r and list(r["shape"]) not in (want, nhwc(want)):
            raise SystemExit("not the same work on {}: {} ran input {}, ours is {}".format(model, engine, r["shape"],
                                                                                          list(want)))


def check_agreement(res, saved):
    """Our IR v11 and mo's IR on the same runtime at f32 must agree to 1e-4."""
    a, b = (np.load(saved[e]).astype(np.float64) for e in ("ov_v11", "ov_mo"))
    if a.shape != b.shape:
        raise SystemExit("not the same work: our IR v11 outputs {}, mo's IR {}".format(a.shape, b.shape))
    agreement = float(np.abs(a - b).max() / np.abs(b).max())
    if agreement > 1e-4:  # both f32 on the same runtime, same weights and input
        raise SystemExit("our IR v11 and mo's IR disagree on OpenVINO {} (f32): max |diff| / max |mo's| = "
                         "{:.3g} > 1e-4".format(res["ov_v11"]["version"], agreement))
    return agreement


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", "--model", default=",".join(MODELS), help="comma-separated (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=None, help="default 50 (--overhead: 2000)")
    parser.add_argument("--rounds", type=int, default=None, help="default 3 (--overhead: 5)")
    parser.add_argument("--throughput", action="store_true", help="also batch 8 with 2 requests in flight")
    parser.add_argument("--tp-batch", type=int, default=8)
    parser.add_argument("--gpu-iterations", type=int, default=10, help="runs of the OpenCL engines (default 10)")
    parser.add_argument("--opencl-rounds", type=int, default=1,
                        help="rounds with the OpenCL engines (default 1; 0 leaves them out)")
    parser.add_argument("--overhead", action="store_true", help="only the daemon's round-trip cost")
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--xml", help=argparse.SUPPRESS)
    parser.add_argument("--relu-xml", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine in ("plan", "daemon-local", "daemon-fallback") and args.xml is None:
        return run_round_trip(args.engine, args.iterations, args.relu_xml)
    if args.overhead:
        return overhead(args.rounds or 5, args.iterations or 2000)
    args.iterations = args.iterations or 50
    args.rounds = args.rounds or 3
    if args.engine:
        args.model = args.models
        return run_engine(args)
    models = [m for m in args.models.split(",") if m]
    tmp = tempfile.mkdtemp(prefix="mo-infer-")
    env = dict(os.environ, MO_CORE_RUNTIME_DIR=os.path.join(tmp, "rt"), GLOG_minloglevel="2")
    env.pop("MO_CORE_CPU_BACKEND", None)  # the daemon runs its default
    load_before = os.getloadavg()
    met, overheads = {}, []
    try:
        relu_xml = trivial_ir(tmp)
        for model in models:
            jobs = [(e, args.batch) for e in latency_engines(model)]
            if args.throughput:
                jobs += [(e, args.tp_batch) for e in THROUGHPUT_ENGINES]
            ours = {b: convert_ours(model, tmp, "{}_b{}".format(model, b), b) for _, b in jobs}
            from ir import read_ir
            shape = tuple(read_ir(ours[args.batch]).inputs()[0].outputs[0].dims)
            ov_xml = openvino_ir(model, shape)
            v11 = convert_ours(model, tmp, "{}_v11".format(model), args.batch, "--ir_version", "11")
            saved = {e: os.path.join(tmp, "{}_{}.npy".format(model, e)) for e in ("ov_mo", "ov_v11")}
            runs = {e: [] for e, _ in jobs}
            for r in range(args.rounds):
                round_jobs = jobs + ([(e, args.batch) for e in OPENCL_ENGINES] if r < args.opencl_rounds else [])
                for engine, batch in round_jobs:
                    xmls = {"ours": ours[batch], "mo": ov_xml, "v11": v11}
                    runs.setdefault(engine, []).append(run_process(engine, model, xmls, relu_xml, batch, args, env,
                                                                   (batch,) + shape[1:], saved.get(engine)))
            res = {e: combine(r) for e, r in runs.items()}
            same_work(model, res, {e: (args.tp_batch if e in THROUGHPUT_ENGINES else args.batch,) + shape[1:]
                                   for e in res})
            res["agreement"] = check_agreement(res, saved)
            met[model], round_trip = report_latency(model, args.batch, args.iterations, args.rounds, res,
                                                  args.gpu_iterations, min(args.rounds, args.opencl_rounds))
            overheads.append(round_trip)
            if args.throughput:
                ours, ov = res["daemon_tp"]["fps"], res["openvino_tp"]["fps"]
                print("throughput, input {}: daemon {} requests {:.1f} FPS; OpenVINO THROUGHPUT hint ({} requests, "
                      "{} streams) {:.1f} FPS; ratio {:.2f}x; goal within 1.2x: {}".format(
                          res["daemon_tp"]["shape"], res["daemon_tp"]["nireq"], ours, res["openvino_tp"]["nireq"],
                          res["openvino_tp"]["streams"], ov, ov / ours, verdict(ov <= 1.2 * ours, ov / ours)))
    finally:
        subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    round_trip = statistics.median(overheads)
    print("daemon round trip, 1x3x224x224 Input->ReLU: overhead over in-process {:.3f} ms (goal <= 0.15: {}; "
          "--overhead measures it alone)".format(round_trip * 1e3, "met" if round_trip <= 0.15e-3 else "NOT met"))
    print("latency goals met on: {}; not met on: {}".format(", ".join(m for m in met if met[m]) or "none",
                                                            ", ".join(m for m in met if not met[m]) or "none"))
    print("load average (1/5/15 min) before {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} {:.2f} on {} CPUs".format(
        *load_before, *os.getloadavg(), os.cpu_count()))


if __name__ == "__main__":
    main()
