"""Inference speed of mo-core's CPU daemon next to OpenVINO's CPU plugin, in f32 and
at each engine's default precision (bf16 where the CPU has AVX512_BF16 or AMX), with
the same work for every engine: the same weights (Caffe nets: He-scaled random
caffemodels made once by pycaffe; Keras ResNet50, MobileNetV2 and MobileNetV3Small:
the frozen graphs of tests/tf/keras_apps.py - weights=None, seeded, random batch-norm
statistics -, Keras ConvNeXtTiny, a BERT-like encoder, a C3D-style video net and a two-LSTM sequence classifier: those
of benchmarks/modern_nets.py,
all built by TensorFlow in a subprocess, benchmarks/built_models.py), the
same random input (seed 0, made in NCHW; an engine that keeps TensorFlow's NHWC gets
the same values transposed), the same batch; float32 inputs and outputs.

    python benchmarks/infer.py [--models bvlc_googlenet,bvlc_alexnet,ssd_style,keras_resnet50,
                                         keras_mobilenet_v2,keras_mobilenet_v3_small,keras_convnext_tiny,
                                         bert_encoder,c3d_style,lstm_sequence]
                               [--batch 1] [--iterations 30] [--rounds 3]
                               [--throughput [--tp-batch 1] [--tp-seconds 1]]
                               [--cpu-time] [--idle-ms 0] [--engines core|all] [--gpu-iterations 10]
                               [--opencl-rounds 1]
    python benchmarks/infer.py --interleave 5 [--rounds 20] [--models ...] [--idle-ms 0]
    python benchmarks/infer.py --overhead [--rounds 5] [--iterations 2000]

Engines (each alone in a fresh process, in a session of its own as the daemon has:
with autogroup scheduling a process of the benchmark's session would share one
group's CPU share on a busy machine; rounds interleave the engines, their order
reversed every other round, so that a change of the machine's load hits all of them
alike; latency: the median of a process's iterations, then the median over the
rounds; min: the fastest call):
- mo-core CPU daemon through IECore (a private daemon), INFERENCE_PRECISION_HINT f32
  and its default (no hint); the ExecutionPlan in-process at the same two precisions
  (what the daemon adds over it is printed);
- the OpenVINO runtime of this venv (its version is printed), LATENCY hint, f32 and
  its default, on the model as OpenVINO's own tools read it: the IR its `mo`
  (openvino-dev 2024.6, the last with Caffe) makes from the Caffe files, and the
  frozen TensorFlow graph read by the runtime's TensorFlow front end;
- with --engines all also: our numpy backend, the framework (pycaffe / TensorFlow),
  OpenCV DNN, OpenVINO f32 on our own IR v11 (`--ir_version 11`; its outputs must
  equal OpenVINO's on its own IR to 1e-4, else the run stops) and the OpenCL rows
  (the GPU daemon and plan, OpenCV's OpenCL target: --gpu-iterations runs in
  --opencl-rounds rounds).
Each row prints the engine's precision and threads as the engine reports them (ours:
the load reply, INFERENCE_NUM_THREADS from os.sched_getaffinity, and for the daemon the team
size it measured faster where that is one thread, "2 (1 used)"; OpenVINO: the compiled
model's properties; our numpy backend and pycaffe: their OpenBLAS's threads; OpenCV:
cv2.getNumThreads(), its CPU target computing in f32; TensorFlow: the intra-op pool,
set to the CPUs of the affinity mask, f32) and the input shape it ran (it must be
ours, else the run stops).

Accuracy (always): our default precision's outputs against our f32 (max |diff| / max
|f32| and whether the top-1 class is unchanged), beside OpenVINO's default against its
f32, on --accuracy-inputs random inputs (seeds 0.., default 8; seed 0 is the timed
one): the largest error over them, their mean and on how many the top-1 class
changed - one input's figure is mostly the luck of where bf16's roundings fall, which
is no ground to call one engine more accurate than the other. The bound of issue 25
(<= 2e-2, top-1 unchanged) reads against the largest. Beside them, the net's own
sensitivity: our f32 on the same inputs rounded to bf16 (ml_dtypes, round to nearest
even, as oneDNN's reorder) against our f32 - a bf16 engine rounds its input for the
first layer, so where this alone is over the bound no such engine meets it (random
weights and BatchNorm statistics make some nets amplify any perturbation). The
reference-catalog CaffeNet is measured for accuracy only (--accuracy-models).
--throughput: at --tp-batch, each engine with its own optimal number of requests in
flight (ours: OPTIMAL_NUMBER_OF_INFER_REQUESTS of the daemon's load reply; OpenVINO:
the THROUGHPUT hint's OPTIMAL_NUMBER_OF_INFER_REQUESTS), default precisions, printed;
each window lasts at least --tp-seconds (default 1) and at least --iterations
requests, the same rule for both (a window of 30 requests is tens of milliseconds).
--cpu-time: ours in-process and OpenVINO again with one thread each (INFERENCE_NUM_THREADS
1), timed by the process's CPU time: on a machine other work keeps busy a second thread
mostly waits for a core, which wall time charges to whoever has one; CPU time measures
the work itself (a second figure, not the goal's). --idle-ms N: every engine sleeps N ms
before each timed request (untimed): the latency of a request that finds the machine
idle, as a server's at a low request rate does (the goals read back to back).

--interleave N: the core engines are loaded side by side (each still in a process and
session of its own, loaded one at a time) and take turns: each in turn runs one
untimed request (the engine before it may still hold the cores - threads spinning at a
barrier after a request - and the caches) and N timed ones, the others waiting; --rounds
cycles of turns (default 20), the order reversed every other cycle; an engine's figure is
the median of all its timed requests (timing.py). On the small VMs this runs on the same
loop's speed changes by ~10 % for a second at a time, and engines timed one after the
other fall into different phases; turns put every engine into the same ones. Beside the
goal's ratio of medians it prints the median and middle half of the per-cycle ratios of
the daemon's turn to OpenVINO's.

The load average is printed at the start of every round and at the end: numbers
taken on a busy machine are not comparable (run the final table on a quiet one); a
verdict whose measurements saw the 1-minute load average above the CPU count says so.

--overhead measures only the daemon's round trip (no reference engine, no model
to convert): Input -> ReLU on 1x3x224x224, in-process vs the daemon through its
local carrier (the default for a local client: bound requests - small raw
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
from benchmarks import timing  # noqa: E402
from benchmarks.references import HOME, bvlc_model, keras_model, openvino_mo  # noqa: E402
from device_daemons.cpu.plan_pool import CHOICE_REQUESTS  # noqa: E402

MODELS = ("bvlc_googlenet", "bvlc_alexnet", "ssd_style", "keras_resnet50", "keras_mobilenet_v2",
          "keras_mobilenet_v3_small", "keras_convnext_tiny", "bert_encoder", "c3d_style", "lstm_sequence")
ACCURACY_MODELS = ("bvlc_reference_caffenet",)  # reference-catalog parity nets measured for accuracy only
# benchmark name -> (builder, graph): tests/tf/keras_apps.py, benchmarks/modern_nets.py
KERAS = {"keras_resnet50": ("keras_apps", "resnet50"), "keras_mobilenet_v2": ("keras_apps", "mobilenet_v2"),
         "keras_mobilenet_v3_small": ("keras_apps", "mobilenet_v3_small"),
         "keras_convnext_tiny": ("modern_nets", "convnext_tiny"), "bert_encoder": ("modern_nets", "bert_encoder"),
         "c3d_style": ("modern_nets", "c3d_style"), "lstm_sequence": ("modern_nets", "lstm_sequence")}
CORE_ENGINES = ("daemon_f32", "daemon_default", "plan_f32", "plan_default", "openvino_f32", "openvino_default")
# --cpu-time: the same on one thread, timed by CPU time (a shared machine's load moves it far less than wall time)
CPU_TIME_ENGINES = ("plan_f32@1t", "plan_default@1t", "openvino_f32@1t", "openvino_default@1t")
EXTRA_ENGINES = ("numpy", "framework", "opencv", "ov_v11")
OPENCL_ENGINES = ("gpu_daemon", "gpu_plan", "opencv_ocl")
THROUGHPUT_ENGINES = ("daemon_tp", "openvino_tp")
F32 = {"INFERENCE_PRECISION_HINT": "f32"}
LABELS = {"daemon_f32": "mo-core CPU daemon, f32", "daemon_default": "mo-core CPU daemon, default",
          "plan_f32": "mo-core plan in-process, f32", "plan_default": "mo-core plan in-process, default",
          "openvino_f32": "OpenVINO {} f32", "openvino_default": "OpenVINO {} default",
          "numpy": "mo-core plan, numpy backend", "framework": "{}", "opencv": "OpenCV DNN {}",
          "ov_v11": "OpenVINO {} f32, our IR v11",
          "gpu_daemon": "mo-core GPU daemon (OpenCL)", "gpu_plan": "mo-core GPU plan in-process",
          "opencv_ocl": "OpenCV DNN {} OpenCL target"}
BOUND = 2e-2  # issue 25: bf16 within 2e-2 of f32 (max |diff| / max |f32|), top-1 unchanged
ACCURACY_INPUTS = 8  # random inputs (seeds 0..) each accuracy figure is taken over


def bench_input(shape, seed=0) -> np.ndarray:
    """The benchmark's input: standard normal, made in our (NCHW) shape."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CLOCK = [time.perf_counter]  # --clock cpu: the process's CPU time (every thread of it) instead
IDLE = [0.0]  # --idle-ms: seconds slept before each timed request
TURNS = [False, None]  # --turns (an --interleave engine): timed in turns (timing.serve_turns); its turns' medians


def measure(fn, iterations, warmup=5):
    if TURNS[0]:
        done = timing.serve_turns(fn, warmup, clock=CLOCK[0], idle=IDLE[0])
        TURNS[1] = done["turns"]
        return done["main"]
    return timing.measure(fn, iterations, warmup, clock=CLOCK[0], idle=IDLE[0])


def model_files(model):
    """What a model is made of: {"proto", "weights"} of a Caffe net, or {"pb", "io"} of
    a frozen TensorFlow graph (io: its inputs and outputs from the builder's index)."""
    if model in KERAS:
        builder, graph = KERAS[model]
        pb = keras_model(graph, builder)
        with open(os.path.join(os.path.dirname(pb), "index.json")) as f:
            return {"pb": pb, "io": json.load(f)[graph]}
    proto, weights = bvlc_model(model)
    return {"proto": proto, "weights": weights}


def convert_ours(model, out_dir, name, batch, *options):
    files = model_files(model)
    source = ["--input_model", files["pb"]] if "pb" in files else ["--input_model", files["weights"],
                                                                   "--input_proto", files["proto"]]
    subprocess.run([sys.executable, "-m", "cli", "convert", *source, "-b", str(batch), "--output_dir", out_dir,
                    "--model_name", name, "--silent", *options], check=True, cwd=ROOT)
    return os.path.join(out_dir, name + ".xml")


def nhwc(shape):
    """TensorFlow's layout of one of our shapes (images: NCHW -> NHWC, volumes NCDHW -> NDHWC; other ranks keep
    theirs)."""
    return [shape[0], *shape[2:], shape[1]] if len(shape) in (4, 5) else list(shape)


def openvino_model(model, shape):
    """The model as OpenVINO's own tools give it to its runtime: for a Caffe net the IR
    of its `mo` at our input `shape` (the sdist's deploy nets say batch 10, and mo's -b
    refuses a shape the model defines: --input_shape); a frozen TensorFlow graph as it
    is (the runtime's TensorFlow front end reads it; the engine sets the batch)."""
    files = model_files(model)
    if "pb" in files:
        return files["pb"]
    out = os.path.join(HOME, "bench-models", "openvino-{}-{}".format(model, "x".join(map(str, shape))))
    xml = os.path.join(out, model + ".xml")
    if not os.path.isfile(xml) or os.path.getmtime(xml) < os.path.getmtime(files["weights"]):
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


def first_output(outputs) -> np.ndarray:
    """The output the accuracy compares: the first one (every benchmark net has one)."""
    return np.asarray(next(iter(outputs.values())) if isinstance(outputs, dict) else outputs[0])


def _openvino(args, shape):
    """(result fields, compiled model, layout) of the OpenVINO runtime on `args.ov_model`;
    layout(x): one of our inputs as that model takes it."""
    import openvino as ov
    core = ov.Core()
    model = core.read_model(args.ov_model)
    port = model.inputs[0]
    partial = port.get_partial_shape()
    want = list(shape)
    layout = lambda x: x  # noqa: E731
    rank = len(want)
    if rank in (4, 5) and partial.rank.get_length() == rank and partial[1].is_static \
            and partial[1].get_length() != want[1]:
        want = nhwc(want)  # TensorFlow's layout, kept by its front end: the same values, transposed
        layout = lambda x: np.ascontiguousarray(x.transpose(0, *range(2, rank), 1))  # noqa: E731
    model.reshape({port.get_any_name(): want})
    mode = args.engine.rsplit("_", 1)[1]
    config = {"PERFORMANCE_HINT": "THROUGHPUT" if mode == "tp" else "LATENCY"}
    if mode in ("f32", "v11"):
        config.update(F32)
    if args.threads:
        config["INFERENCE_NUM_THREADS"] = args.threads
    compiled = core.compile_model(model, "CPU", config)
    precision = compiled.get_property("INFERENCE_PRECISION_HINT")
    result = {"shape": want, "version": ov.__version__.split("-")[0],
              "precision": getattr(precision, "get_type_name", lambda: str(precision))(),
              "threads": int(compiled.get_property("INFERENCE_NUM_THREADS"))}
    return result, compiled, layout


def run_engine(args):
    """One engine, measured alone in this process (prints JSON)."""
    os.environ.setdefault("GLOG_minloglevel", "2")
    engine = args.engine
    if args.clock == "cpu":
        CLOCK[0] = time.process_time
    IDLE[0] = args.idle_ms / 1e3
    TURNS[0] = args.turns
    from ir import read_ir
    network = read_ir(args.xml)
    name = network.inputs()[0].name
    shape = tuple(network.inputs()[0].outputs[0].dims)
    x = bench_input(shape)
    result = {"shape": list(shape)}
    out = None  # (the accuracy's outputs: a function of the engine's input)
    if engine.startswith("daemon"):
        from device_daemons.client import IECore
        ie = IECore(policy="auto", timeout=600)
        net = ie.read_network(model=args.xml)
        exec_net = ie.load_network(net, "CPU", config=F32 if engine == "daemon_f32" else None)
        result.update(precision=exec_net.get_config("INFERENCE_PRECISION_HINT"),
                      threads=exec_net.get_config("INFERENCE_NUM_THREADS"))
        if engine == "daemon_tp":
            nireq = exec_net.get_metric("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
            exec_net = ie.load_network(net, "CPU", num_requests=nireq)  # (the daemon has it compiled)
            result.update(daemon_fps(exec_net, name, x, args.iterations, args.tp_seconds), nireq=nireq)
        else:
            # (warmed up past its team choice too: the daemon measures its first requests on both team sizes)
            result["main"] = measure(lambda: exec_net.infer({name: x}), args.iterations, warmup=5 + CHOICE_REQUESTS)
            result["threads"] = daemon_threads(exec_net)
            out = lambda v: first_output(exec_net.infer({name: v}))  # noqa: E731
    elif engine.startswith("plan") or engine == "numpy":
        from device_daemons.cpu.plan import ExecutionPlan
        plan = ExecutionPlan(network, backend="numpy" if engine == "numpy" else "onednn",
                             precision=None if engine == "plan_default" else "f32", threads=args.threads)
        threads = "BLAS {}".format(blas_threads("numpy")) if engine == "numpy" else plan.threads
        result.update(precision=plan.precision_used, threads=threads,
                      main=measure(lambda: plan.infer({name: x}), args.iterations))
        steps = plan.program.steps
        result.update(onednn_layers=sum(len(s.layers) for s in steps if s.backend == "onednn"),
                      reorders=sum(1 for s in steps if s.type == "Reorder"),
                      numpy_layers=sum(1 for s in steps if s.backend == "numpy"),
                      c_layers=sum(1 for s in steps if s.backend == "native"))
    elif engine.startswith(("openvino", "ov_")):
        fields, compiled, layout = _openvino(args, shape)
        x = layout(x)
        result.update(fields)
        if engine == "openvino_tp":
            nireq = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
            result.update(openvino_fps(compiled, x, nireq, args.iterations, args.tp_seconds), nireq=nireq,
                          streams=int(compiled.get_property("NUM_STREAMS")))
        else:
            request = compiled.create_infer_request()
            result["main"] = measure(lambda: request.infer({0: x}), args.iterations)
            out = lambda v: first_output(request.infer({0: layout(v)}))  # noqa: E731
    elif engine == "gpu_daemon":
        from device_daemons.client import IECore
        ie = IECore(policy="auto", timeout=600)
        exec_net = ie.load_network(ie.read_network(model=args.xml), "GPU")
        result["main"] = measure(lambda: exec_net.infer({name: x}), args.gpu_iterations, warmup=2)
        result["device"] = _opencl_device_name()  # the same choice as the daemon (GPU, MO_CORE_OPENCL_DEVICE)
        from device_daemons.gpu.plan import network_precision  # (what the GPU daemon's plan computes in)
        result.update(precision=network_precision(network).lower(), threads="OpenCL")
    elif engine == "gpu_plan":
        from device_daemons.gpu import GpuPlan
        plan = GpuPlan(network)
        result.update(precision=plan.precision.lower(), threads="OpenCL",
                      main=measure(lambda: plan.infer({name: x}), args.gpu_iterations, warmup=2))
    elif engine in ("opencv", "opencv_ocl"):
        import cv2
        ocl = engine == "opencv_ocl"
        # DNN_TARGET_CPU and DNN_TARGET_OPENCL compute in f32 (the _FP16 targets would not)
        result.update(version=cv2.__version__, precision="f32", threads="OpenCL" if ocl else cv2.getNumThreads())
        try:
            cv_forward = _opencv_forward(args.model, x, cv2.dnn.DNN_TARGET_OPENCL if ocl else cv2.dnn.DNN_TARGET_CPU)
            cv_forward()  # (OpenCL: compiles OpenCV's kernels, minutes on PoCL): not timed
        except cv2.error as err:
            result["error"] = _opencv_error(err)
        else:
            result["main"] = measure(cv_forward, args.gpu_iterations if ocl else args.iterations, warmup=1)
        if ocl:
            device = cv2.ocl.Device.getDefault()
            result["device"] = device.name() if cv2.ocl.useOpenCL() and device.name() else "none: ran on the CPU"
    elif engine == "framework" and args.model in KERAS:
        run, threads = _tensorflow_run(args.model, x)
        result.update(shape=nhwc(shape), main=measure(run, args.iterations), precision="f32", threads=threads)
        import tensorflow as tf
        result["version"] = "TensorFlow " + tf.__version__
    elif engine == "framework":
        import caffe
        files = model_files(args.model)
        net = caffe.Net(files["proto"], files["weights"], caffe.TEST)
        blob = net.inputs[0]
        net.blobs[blob].reshape(*shape)  # the batch of the others (the deploy nets say 10)
        net.reshape()
        net.blobs[blob].data[...] = x
        # Caffe's CPU mode: float32, its threads the BLAS's it links (the system's OpenBLAS)
        result.update(shape=list(net.blobs[blob].data.shape), version="pycaffe", precision="f32",
                      threads="BLAS {}".format(blas_threads("x86_64-linux-gnu")),
                      main=measure(net.forward, args.iterations))
    if out is not None and args.save:  # the first output on each accuracy input, stacked
        inputs = [bench_input(shape, seed) for seed in range(args.accuracy_inputs)]
        np.save(args.save, np.stack([out(v) for v in inputs]))
        if engine == "daemon_f32":  # the net's sensitivity to bf16's rounding of its input alone
            np.save(rounded_path(args.save), np.stack([out(round_to_bf16(v)) for v in inputs]))
    if TURNS[1] is not None:
        result["turns"] = TURNS[1]
    print(json.dumps(result))


def openvino_fps(compiled, x, nireq, iterations, seconds) -> dict:
    """{fps, requests, seconds} of OpenVINO with `nireq` requests in flight
    (AsyncInferQueue): at least `iterations` requests and at least `seconds` (as
    daemon_fps: the same window rule for every engine)."""
    import openvino as ov
    queue = ov.AsyncInferQueue(compiled, nireq)
    for _ in range(2 * nireq):
        queue.start_async({0: x})
    queue.wait_all()
    start = time.perf_counter()
    done = 0
    while done < iterations or time.perf_counter() - start < seconds:
        queue.start_async({0: x})  # (waits for a free request)
        done += 1
    queue.wait_all()
    return fps_result(done, x.shape[0], time.perf_counter() - start)


def daemon_threads(exec_net) -> str:
    """The CPU daemon's threads for the network: its team (the load reply), and the team size it measured
    faster for a request that runs alone where that is one thread (its status; device_daemons/cpu/plan_pool.py)."""
    team = exec_net.get_config("INFERENCE_NUM_THREADS")
    status, _ = exec_net.link.call("status")
    chosen = next((n.get("threads") for n in status["networks"] if n["handle"] == exec_net._loaded[1]), None)
    return "{} ({} used)".format(team, chosen) if chosen not in (None, team) else str(team)


def blas_threads(path_part: str):
    """The thread count of the OpenBLAS loaded in this process whose path contains
    `path_part` (numpy's own: "numpy"; the system's, pycaffe's: "x86_64-linux-gnu"),
    "?" where none is (another BLAS)."""
    import ctypes
    with open("/proc/self/maps") as f:
        paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line})
    for path in [p for p in paths if path_part in p]:
        lib = ctypes.CDLL(path)
        for symbol in ("openblas_get_num_threads", "openblas_get_num_threads64_", "scipy_openblas_get_num_threads64_"):
            if hasattr(lib, symbol):
                return getattr(lib, symbol)()
    return "?"


def fps_result(requests, batch, elapsed) -> dict:
    return {"fps": requests * batch / elapsed, "requests": requests, "seconds": elapsed}


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


def _opencv_error(err) -> str:
    """OpenCV's own words for a model it cannot read or run (the row says it)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return re.sub(r"^.*error: \([^)]*\) ", "", lines[-1])[:200] if lines else type(err).__name__


def _tensorflow_run(model, x):
    """(run, threads): TensorFlow running the frozen graph (a GraphDef session, as it was
    frozen) on x in its NHWC layout, its intra-op pool set to the CPUs of the affinity
    mask (what TensorFlow picks by default and what our engines use: said, not assumed)."""
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
    feed = {graph.get_tensor_by_name(input_name + ":0"): np.ascontiguousarray(
        x.transpose(0, *range(2, x.ndim), 1) if x.ndim in (4, 5) else x)}
    fetch = [graph.get_tensor_by_name(name + ":0") for name in files["io"]["outputs"]]
    threads = len(os.sched_getaffinity(0))
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads)
    session = tf.compat.v1.Session(graph=graph, config=config)
    return (lambda: session.run(fetch, feed)), "intra-op {}".format(threads)


def _has_opencl_gpu() -> bool:
    proc = subprocess.run([sys.executable, "-c", "from device_daemons.gpu import list_devices; "
                           "print(int(any(d.type & 4 for _, _, d in list_devices())))"],
                          capture_output=True, text=True, cwd=ROOT)
    return proc.stdout.strip() == "1"


def _opencl_device_name() -> str:
    from device_daemons.gpu import open_device
    return open_device("GPU").full_name


def daemon_fps(exec_net, name, x, iterations, seconds) -> dict:
    """{fps, requests, seconds} with every request of exec_net kept busy by its own
    thread (each warmed up before the clock starts, as openvino_fps warms its queue: a
    thread's first request opens its own connection to the daemon): at least
    `iterations` requests and at least `seconds`, as openvino_fps."""
    count = {"started": 0}
    lock = threading.Lock()
    ready = threading.Barrier(len(exec_net.requests) + 1)
    go = threading.Event()
    window = {}

    def loop(request):
        for _ in range(2):
            request.infer({name: x})
        ready.wait()
        go.wait()
        while True:
            with lock:
                if count["started"] >= iterations and time.perf_counter() - window["start"] >= seconds:
                    return
                count["started"] += 1
            request.infer({name: x})
    threads = [threading.Thread(target=loop, args=(r,)) for r in exec_net.requests]
    for t in threads:
        t.start()
    ready.wait()  # every thread warmed up
    window["start"] = start = time.perf_counter()
    go.set()
    for t in threads:
        t.join()
    return fps_result(count["started"], x.shape[0], time.perf_counter() - start)


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
    loads = []
    try:
        relu_xml = trivial_ir(tmp)
        for r in range(rounds):
            loads.append(os.getloadavg())
            for key, _, extra in variants[::-1] if r % 2 else variants:  # no variant always first
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
    loads.append(os.getloadavg())
    print("goal: round-trip overhead <= 0.15 ms over in-process: {} ({:.3f} ms){}; load average {:.2f} {:.2f} "
          "{:.2f}".format("met" if local - plan <= 0.15e-3 else "NOT met", (local - plan) * 1e3, load_caveat(loads),
                          *loads[-1]))
    print("(both sides poll for the next message before sleeping only while the CPUs are not contended: "
          "core/microkernel/spin.py)")


def engines_for(engines: str, opencl: bool) -> tuple:
    chosen = CORE_ENGINES + (EXTRA_ENGINES if engines == "all" else ())
    return chosen + (OPENCL_ENGINES if opencl and engines == "all" else ())


def engine_command(engine, model, files, args, env, save=None, iterations=None, turns=False):
    """(command, environment) of an engine's process. files: {"ours": our IR at this
    batch, "ov": OpenVINO's model, "v11": our IR v11}. An engine named "E@1t" is E on
    one thread, timed by the process's CPU time; `turns`: timed in turns (--interleave)."""
    engine, _, one_thread = engine.partition("@")
    cmd = [sys.executable, os.path.abspath(__file__), "--engine", engine, "--models", model, "--iterations",
           str(iterations or args.iterations), "--xml", files["ours"], "--gpu-iterations", str(args.gpu_iterations),
           "--ov-model", files["v11"] if engine == "ov_v11" else files["ov"],
           "--accuracy-inputs", str(args.accuracy_inputs), "--tp-seconds", str(args.tp_seconds),
           "--idle-ms", str(args.idle_ms)] + (
               ["--save", save] if save else []) + (["--turns"] if turns else [])
    if one_thread:
        cmd += ["--threads", "1", "--clock", "cpu"]
    if engine == "opencv_ocl":
        env = dict(env, OPENCV_DNN_OPENCL_ALLOW_ALL_DEVICES="1")
        if not _has_opencl_gpu():
            env["OPENCV_OPENCL_DEVICE"] = ":CPU:"  # OpenCV looks for a GPU otherwise
    return cmd, env


def run_interleaved(engines, model, files, args, env, saved) -> dict:
    """The latency engines loaded side by side, timed in --rounds cycles of turns of
    --interleave requests each (timing.Turns), the order reversed every other cycle:
    {engine: its result, with "turns": each turn's median}. Each daemon engine has a
    daemon of its own (a runtime directory of its own), as each OpenVINO engine has its
    own process: two clients of one daemon, each on a connection thread that ran
    requests on the whole team, leave it two OpenMP teams, and libgomp then hardly
    spins at barriers (device_daemons/cpu/teams.py) - a cost of sharing one daemon
    that the other engines do not pay."""
    commands = {e: engine_command(e, model, files, args, env, saved.get(e), turns=True)[0] for e in engines}
    own = {e: dict(env, MO_CORE_RUNTIME_DIR=tempfile.mkdtemp(prefix="mo-bench-rt-"))
           for e in engines if e.startswith(("daemon", "gpu_daemon"))}
    try:
        return timing.interleaved(commands, env, ROOT, args.rounds, args.interleave, envs=own)
    finally:
        for daemon_env in own.values():
            subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=daemon_env,
                           capture_output=True, cwd=ROOT)
            shutil.rmtree(daemon_env["MO_CORE_RUNTIME_DIR"], ignore_errors=True)


def run_process(engine, model, files, batch, args, env, save=None, iterations=None):
    """One engine's measurement in a process of its own (engine_command)."""
    cmd, env = engine_command(engine, model, files, args, env, save, iterations)
    # a session of its own, as the daemon has (core/microkernel/launcher.py): with autogroup scheduling
    # an engine left in this benchmark's session would share one group's CPU with it on a busy machine
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, start_new_session=True)
    if proc.returncode:
        raise SystemExit("{} on {} failed:\n{}".format(engine, model, proc.stderr[-3000:]))
    if engine.startswith(("daemon", "gpu_daemon")):
        subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env, capture_output=True, cwd=ROOT)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def combine(runs):
    """Several rounds of one engine -> one result: medians of the per-round figures."""
    out = dict(runs[0])
    if "main" in out:
        out["main"] = (statistics.median(r["main"][0] for r in runs), min(r["main"][1] for r in runs))
    if "fps" in out:
        out["fps"] = statistics.median(r["fps"] for r in runs)
        out.update({k: runs[-1][k] for k in ("requests", "seconds")})
    return out


def round_to_bf16(x) -> np.ndarray:
    """x rounded to bfloat16 (nearest even) and back to float32."""
    import ml_dtypes  # (TensorFlow's dependency: the Keras nets need it already)
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def rounded_path(saved: str) -> str:
    """Where our f32 engine saves its outputs on the inputs rounded to bf16."""
    return saved[:-len(".npy")] + "_bf16_input.npy"


def rel_err(value, ref) -> float:
    value, ref = np.asarray(value, np.float64), np.asarray(ref, np.float64)
    if value.shape != ref.shape:
        raise SystemExit("not the same work: outputs {} and {}".format(value.shape, ref.shape))
    return float(np.abs(value - ref).max() / max(np.abs(ref).max(), 1e-30))


def same_top1(value, ref) -> bool:
    value, ref = np.asarray(value), np.asarray(ref)
    return bool(np.array_equal(value.reshape(value.shape[0], -1).argmax(1), ref.reshape(ref.shape[0], -1).argmax(1)))


def accuracy(saved) -> dict:
    """Each engine's default precision against its own f32, and our f32 against OpenVINO's,
    over the accuracy inputs (saved stacked): {who: (largest error, top-1 unchanged on
    all, mean error, inputs whose top-1 changed, inputs)}, f32_agreement: the largest;
    input_rounding: the largest of our f32 on the inputs rounded to bf16 against it."""
    out = {key: np.load(path) for key, path in saved.items() if os.path.isfile(path)}
    acc = {}
    for who, (default, f32) in (("ours", ("daemon_default", "daemon_f32")),
                                ("openvino", ("openvino_default", "openvino_f32"))):
        errs = [rel_err(a, b) for a, b in zip(out[default], out[f32])]
        changed = sum(not same_top1(a, b) for a, b in zip(out[default], out[f32]))
        acc[who] = (max(errs), changed == 0, statistics.mean(errs), changed, len(errs))
    acc["f32_agreement"] = agreement(out["daemon_f32"], out["openvino_f32"])
    rounded = rounded_path(saved["daemon_f32"])
    acc["input_rounding"] = agreement(np.load(rounded), out["daemon_f32"]) if os.path.isfile(rounded) else None
    return acc


def agreement(value, ref) -> float:
    """The largest rel_err over stacked outputs (one per accuracy input)."""
    return max(rel_err(a, b) for a, b in zip(value, ref))


def verdict(ok, ratio):
    return "met ({:.2f}x)".format(ratio) if ok else "NOT met ({:.2f}x)".format(ratio)


def load_caveat(loads) -> str:
    """What a verdict says beside it when the 1-minute load average (os.getloadavg
    triples taken during its measurements) exceeded the CPU count: other work then took
    cores from whichever engine ran, and the figures do not decide the goal."""
    peak, cpus = max(load[0] for load in loads), os.cpu_count()
    if peak <= cpus:
        return ""
    return " - but the load average reached {:.1f} on {} CPUs: other processes took cores, this does not decide " \
           "the goal".format(peak, cpus)


def label(key, r):
    text = LABELS[key]
    return text.format(r.get("version", "")) if "{}" in text else text


def report_latency(model, args, res, acc, loads):
    """Prints the model's table; returns its summary row. loads: the load averages taken
    during its rounds."""
    print()
    if args.interleave:
        print("{}: batch {}, the engines loaded side by side, each in its own process and session (as the daemon's), "
              "taking turns of {} timed requests (after one untimed), {} cycles (the order reversed every other "
              "cycle)".format(model, args.batch, args.interleave, args.rounds))
    else:
        print("{}: batch {}, {} iterations x {} rounds per engine (the order reversed every other round), each "
              "engine alone in its own process and session (as the daemon's)".format(model, args.batch,
                                                                                     args.iterations, args.rounds))
    print("{:<42}{:<10}{:>11}  {:<20}{:>10}{:>9}{:>21}".format("engine", "precision", "threads", "input shape",
                                                              "median ms", "min ms", "vs OpenVINO"))
    ov = {"f32": res["openvino_f32"]["main"][0], "default": res["openvino_default"]["main"][0]}
    for key in [k for k in engines_for(args.engines, True) if k in res]:
        r = res[key]
        if "error" in r:
            print("{:<42}{:<10}{:>11}  {:<20}  cannot run it: {}".format(
                label(key, r), str(r.get("precision", "")), str(r.get("threads", "")), str(r["shape"]), r["error"]))
            continue
        against = "default" if key.endswith("default") else "f32"
        versus = "{:.2f}x (OV {})".format(r["main"][0] / ov[against], against) if "main" in r else ""
        print("{:<42}{:<10}{:>11}  {:<20}{:>10.2f}{:>9.2f}{:>21}".format(
            label(key, r), str(r.get("precision", "?")), str(r.get("threads", "?")), str(r["shape"]),
            r["main"][0] * 1e3, r["main"][1] * 1e3, versus))
    if any(list(r.get("shape", ())) == nhwc(res["daemon_f32"]["shape"]) for r in res.values() if isinstance(r, dict)):
        print("(an input [n, h, w, c] or [n, d, h, w, c] is the same input in TensorFlow's NHWC / NDHWC layout)")
    if "gpu_daemon" in res:
        print("OpenCL rows: device mo-core {}, OpenCV {}; {} runs x {} rounds each".format(
            res["gpu_daemon"]["device"], res["opencv_ocl"]["device"], args.gpu_iterations,
            min(args.rounds, args.opencl_rounds)))
    plan = res["plan_default"]
    print("our program ({}): {} layers on oneDNN, {} reorders, {} on our C kernels, {} on numpy".format(
        plan["precision"], plan["onednn_layers"], plan["reorders"], plan["c_layers"], plan["numpy_layers"]))
    ratio = {p: res["daemon_" + p]["main"][0] / ov[p] for p in ("f32", "default")}
    extra = {p: res["daemon_" + p]["main"][0] - res["plan_" + p]["main"][0] for p in ("f32", "default")}
    print("the daemon over the plan in-process: f32 {:+.2f} ms ({:+.1%}), default {:+.2f} ms ({:+.1%})".format(
        extra["f32"] * 1e3, extra["f32"] / res["plan_f32"]["main"][0], extra["default"] * 1e3,
        extra["default"] / res["plan_default"]["main"][0]))
    if args.interleave:
        print("per cycle, the daemon's turn over OpenVINO's (median, middle half): " + "; ".join(
            "{} {}".format(p, timing.paired(res["daemon_" + p]["turns"], res["openvino_" + p]["turns"]))
            for p in ("f32", "default")))
    print("goals ({}): ours default <= 1.0x OpenVINO default: {}; ours f32 <= 1.0x OpenVINO f32: {}{}".format(
        model, verdict(ratio["default"] <= 1.0, ratio["default"]), verdict(ratio["f32"] <= 1.0, ratio["f32"]),
        load_caveat(loads)))
    one_thread = None
    if "plan_f32@1t" in res:
        one_thread = {p: res["plan_{}@1t".format(p)]["main"][0] / res["openvino_{}@1t".format(p)]["main"][0]
                      for p in ("f32", "default")}
        print("one thread each, CPU time per inference (ours in-process): ours f32 {:.2f} ms vs OpenVINO f32 {:.2f} ms "
              "({:.2f}x); ours {} {:.2f} ms vs OpenVINO {} {:.2f} ms ({:.2f}x)".format(
                  res["plan_f32@1t"]["main"][0] * 1e3, res["openvino_f32@1t"]["main"][0] * 1e3, one_thread["f32"],
                  res["plan_default@1t"]["precision"], res["plan_default@1t"]["main"][0] * 1e3,
                  res["openvino_default@1t"]["precision"], res["openvino_default@1t"]["main"][0] * 1e3,
                  one_thread["default"]))
    print_accuracy(model, res, acc)
    if "ov_v11" in res:
        print("OpenVINO {} f32 on our IR v11 vs on its own model: latency ratio {:.2f}, outputs agree to {:.2g} "
              "(checked <= 1e-4)".format(res["ov_v11"]["version"], res["ov_v11"]["main"][0] / ov["f32"],
                                         res["v11_agreement"]))
    return {"model": model, "ratio": ratio, "acc": acc, "one_thread": one_thread,
            "precision": (res["daemon_default"]["precision"], res["openvino_default"]["precision"])}


def print_accuracy(model, res, acc):
    ours, theirs = acc["ours"], acc["openvino"]
    dt, ov_dt = res["daemon_default"]["precision"], res["openvino_default"]["precision"]
    ok = ours[0] <= BOUND and ours[1]
    print("accuracy ({}, {} inputs): ours {} vs our f32: max rel err {:.3g} (mean {:.3g}), top-1 changed on {}; "
          "OpenVINO {} vs its f32: {:.3g} (mean {:.3g}), top-1 changed on {}; bound <= {:g} and top-1 unchanged: "
          "{}; ours f32 vs OpenVINO f32: {:.2g}".format(
              model, ours[4], dt, ours[0], ours[2], ours[3], ov_dt, theirs[0], theirs[2], theirs[3], BOUND,
              "met" if ok else "NOT met", acc["f32_agreement"]))
    rounding = acc.get("input_rounding")
    if rounding is not None:
        print("the net's own sensitivity ({}): our f32 on the same inputs rounded to bf16 vs on them: max rel err "
              "{:.3g}{}".format(model, rounding, " - over the bound already: no engine that rounds its input to "
                                "bf16 can meet it here" if rounding > BOUND else ""))


def report_throughput(res, loads):
    ours, ov = res["daemon_tp"], res["openvino_tp"]
    print("throughput, input {}: ours ({}, {} threads) with its optimal {} requests in flight {:.1f} FPS; OpenVINO "
          "THROUGHPUT hint ({}, {} threads, {} streams) with its optimal {} requests {:.1f} FPS; ours/OpenVINO "
          "{:.2f}{}".format(ours["shape"], ours["precision"], ours["threads"], ours["nireq"], ours["fps"],
                            ov["precision"], ov["threads"], ov["streams"], ov["nireq"], ov["fps"],
                            ours["fps"] / ov["fps"], load_caveat(loads)))
    print("(each window: at least {:g} s and {} requests; the last round's: ours {} requests in {:.2f} s, OpenVINO {} "
          "in {:.2f} s)".format(res["tp_seconds"], res["tp_iterations"], ours["requests"], ours["seconds"],
                                ov["requests"], ov["seconds"]))


def same_work(model, res, shapes):
    """Stops the run unless every engine computed our input shape (its batch)."""
    for engine, r in res.items():
        want = list(shapes[engine])
        if isinstance(r, dict) and "shape" in r and list(r["shape"]) not in (want, nhwc(want)):
            raise SystemExit("not the same work on {}: {} ran input {}, ours is {}".format(model, engine, r["shape"],
                                                                                          list(want)))


def summary(rows, accuracy_rows, loads):
    print()
    print("summary (the daemon, batch 1; ratios: ours / OpenVINO, < 1 is faster; bf16 error: max |diff| / max |f32|, "
          "the largest over the accuracy inputs / their mean; top-1!: it changed on one; bf16 input err: our f32 on "
          "the inputs rounded to bf16, the net's own sensitivity)")
    print("{:<26}{:>12}{:>16}{:>23}{:>26}{:>26}{:>18}".format("model", "f32 ratio", "default ratio",
                                                              "1-thread CPU f32/def", "ours default err",
                                                              "OV default err", "bf16 input err"))
    for row in rows + accuracy_rows:
        acc = row["acc"]
        ratio, one = row.get("ratio"), row.get("one_thread")
        rounding = acc.get("input_rounding")
        print("{:<26}{:>12}{:>16}{:>23}{:>26}{:>26}{:>18}".format(
            row["model"], "{:.2f}".format(ratio["f32"]) if ratio else "-",
            "{:.2f}".format(ratio["default"]) if ratio else "-",
            "{:.2f} / {:.2f}".format(one["f32"], one["default"]) if one else "-",
            "{:.3g}/{:.3g}{}".format(acc["ours"][0], acc["ours"][2], "" if acc["ours"][1] else " top-1!"),
            "{:.3g}/{:.3g}{}".format(acc["openvino"][0], acc["openvino"][2], "" if acc["openvino"][1] else " top-1!"),
            "-" if rounding is None else "{:.3g}".format(rounding)))
    print("default precisions: ours {}, OpenVINO {}".format(*rows[0]["precision"]) if rows else "")
    for what, key in (("ours default <= 1.0x OpenVINO default", "default"), ("ours f32 <= 1.0x OpenVINO f32", "f32")):
        met = [r["model"] for r in rows if r["ratio"][key] <= 1.0]
        print("{}: met on {}; not met on {}{}".format(what, ", ".join(met) or "none",
                                                      ", ".join(r["model"] for r in rows if r["model"] not in met)
                                                      or "none", load_caveat(loads)))
    ok = [r["model"] for r in rows + accuracy_rows if r["acc"]["ours"][0] <= BOUND and r["acc"]["ours"][1]]
    print("bf16 bound (<= {:g}, top-1 unchanged): met on {}; not met on {}".format(
        BOUND, ", ".join(ok) or "none", ", ".join(r["model"] for r in rows + accuracy_rows if r["model"] not in ok)
        or "none"))
    one = [x[0] for x in loads]
    print("load average (1 min) over the run: min {:.2f}, median {:.2f}, max {:.2f} on {} CPUs (affinity {})".format(
        min(one), statistics.median(one), max(one), os.cpu_count(), len(os.sched_getaffinity(0))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", "--model", default=",".join(MODELS), help="comma-separated (default: %(default)s)")
    parser.add_argument("--accuracy-models", default=",".join(ACCURACY_MODELS),
                        help="nets measured for accuracy only (default: %(default)s; '' for none)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--accuracy-inputs", type=int, default=ACCURACY_INPUTS,
                        help="random inputs the accuracy is measured on (default %(default)s)")
    parser.add_argument("--iterations", type=int, default=None, help="default 30 (--overhead: 2000)")
    parser.add_argument("--rounds", type=int, default=None, help="default 3 (--overhead: 5)")
    parser.add_argument("--engines", choices=("core", "all"), default="core",
                        help="core: ours and OpenVINO, f32 and default; all: also numpy, the framework, OpenCV DNN, "
                             "OpenVINO on our IR v11, and the OpenCL rows")
    parser.add_argument("--throughput", action="store_true", help="also throughput with each engine's optimal "
                                                                  "requests in flight")
    parser.add_argument("--tp-batch", type=int, default=1)
    parser.add_argument("--tp-seconds", type=float, default=1.0,
                        help="each throughput window lasts at least this long, and at least --iterations requests, "
                             "for every engine (default %(default)s)")
    parser.add_argument("--gpu-iterations", type=int, default=10, help="runs of the OpenCL engines (default 10)")
    parser.add_argument("--opencl-rounds", type=int, default=1,
                        help="rounds with the OpenCL engines (--engines all; default 1; 0 leaves them out)")
    parser.add_argument("--overhead", action="store_true", help="only the daemon's round-trip cost")
    parser.add_argument("--idle-ms", type=float, default=0.0,
                        help="every engine sleeps this long before each timed request (latency after the "
                             "machine idled; default 0: back to back)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="also ours (in-process) and OpenVINO on one thread each, timed by CPU time")
    parser.add_argument("--interleave", type=int, default=0, metavar="N",
                        help="the engines loaded side by side take turns of N timed requests (after one untimed), "
                             "--rounds cycles of turns (default 20), so that all see the same phases of the machine "
                             "(default 0: each engine alone, rounds of --iterations)")
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--turns", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--clock", default="wall", help=argparse.SUPPRESS)
    parser.add_argument("--xml", help=argparse.SUPPRESS)
    parser.add_argument("--ov-model", help=argparse.SUPPRESS)
    parser.add_argument("--save", help=argparse.SUPPRESS)
    parser.add_argument("--relu-xml", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine in ("plan", "daemon-local", "daemon-fallback") and args.xml is None:
        return run_round_trip(args.engine, args.iterations, args.relu_xml)
    if args.overhead:
        return overhead(args.rounds or 5, args.iterations or 2000)
    args.iterations = args.iterations or 30
    args.rounds = args.rounds or (20 if args.interleave else 3)
    if args.interleave and (args.throughput or args.cpu_time or args.engines != "core"):
        parser.error("--interleave times the core engines' latency only: leave out --throughput, --cpu-time "
                     "and --engines all")
    if args.engine:
        args.model = args.models
        return run_engine(args)
    from ir import read_ir
    models = [m for m in args.models.split(",") if m]
    tmp = tempfile.mkdtemp(prefix="mo-infer-")
    env = dict(os.environ, MO_CORE_RUNTIME_DIR=os.path.join(tmp, "rt"), GLOG_minloglevel="2")
    env.pop("MO_CORE_CPU_BACKEND", None)  # the daemon runs its default
    loads = [os.getloadavg()]
    print("load average (1/5/15 min) at the start: {:.2f} {:.2f} {:.2f}".format(*loads[0]), flush=True)
    if args.idle_ms:
        print("every engine sleeps {:g} ms before each timed request (latency after the machine idled)".format(
            args.idle_ms), flush=True)
    rows, accuracy_rows = [], []
    try:
        for model in models:
            jobs = [(e, args.batch) for e in engines_for(args.engines, False)]
            if args.cpu_time:
                jobs += [(e, args.batch) for e in CPU_TIME_ENGINES]
            if args.throughput:
                jobs += [(e, args.tp_batch) for e in THROUGHPUT_ENGINES]
            files = {}
            for batch in {b for _, b in jobs}:
                ours = convert_ours(model, tmp, "{}_b{}".format(model, batch), batch)
                shape = tuple(read_ir(ours).inputs()[0].outputs[0].dims)
                files[batch] = {"ours": ours, "ov": openvino_model(model, shape), "v11": ""}
            if args.engines == "all":
                files[args.batch]["v11"] = convert_ours(model, tmp, "{}_v11".format(model), args.batch,
                                                        "--ir_version", "11")
            saved = {e: os.path.join(tmp, "{}_{}.npy".format(model, e)) for e in CORE_ENGINES + ("ov_v11",)}
            runs = {}
            first = len(loads)  # (this model's rounds' load averages: loads[first:])
            if args.interleave:
                loads.append(os.getloadavg())
                print("[ {} interleaved ] load average {:.2f} {:.2f} {:.2f}".format(model, *loads[-1]),
                      file=sys.stderr, flush=True)
                runs = {e: [r] for e, r in run_interleaved([e for e, _ in jobs], model, files[args.batch], args, env,
                                                            saved).items()}
            for r in range(0 if args.interleave else args.rounds):
                loads.append(os.getloadavg())
                print("[ {} round {} ] load average {:.2f} {:.2f} {:.2f}".format(model, r + 1, *loads[-1]),
                      file=sys.stderr, flush=True)
                round_jobs = jobs + ([(e, args.batch) for e in OPENCL_ENGINES]
                                     if args.engines == "all" and r < args.opencl_rounds else [])
                for engine, batch in round_jobs[::-1] if r % 2 else round_jobs:  # no engine always first or last
                    runs.setdefault(engine, []).append(run_process(engine, model, files[batch], batch, args, env,
                                                                   saved.get(engine) if r == 0 else None))
            res = {e: combine(r) for e, r in runs.items()}
            shape = read_ir(files[args.batch]["ours"]).inputs()[0].outputs[0].dims
            same_work(model, res, {e: (args.tp_batch if e in THROUGHPUT_ENGINES else args.batch,) + tuple(shape[1:])
                                   for e in res})
            if "ov_v11" in res:
                res["v11_agreement"] = agreement(np.load(saved["ov_v11"]), np.load(saved["openvino_f32"]))
                if res["v11_agreement"] > 1e-4:  # both f32 on the same runtime, same weights and input
                    raise SystemExit("our IR v11 and OpenVINO's own model disagree on its runtime (f32) by {:.3g} > "
                                     "1e-4".format(res["v11_agreement"]))
            model_loads = loads[first:] + [os.getloadavg()]
            rows.append(report_latency(model, args, res, accuracy(saved), model_loads))
            if args.throughput:
                res.update(tp_seconds=args.tp_seconds, tp_iterations=args.iterations)
                report_throughput(res, model_loads)
        for model in [m for m in args.accuracy_models.split(",") if m]:
            ours = convert_ours(model, tmp, model, args.batch)
            files = {"ours": ours, "ov": openvino_model(model, tuple(read_ir(ours).inputs()[0].outputs[0].dims)),
                     "v11": ""}
            saved = {e: os.path.join(tmp, "{}_{}.npy".format(model, e)) for e in CORE_ENGINES}
            res = {e: run_process(e, model, files, args.batch, args, env, saved[e], iterations=1)
                   for e in ("daemon_f32", "daemon_default", "openvino_f32", "openvino_default")}
            acc = accuracy(saved)
            print()
            print_accuracy(model, res, acc)
            accuracy_rows.append({"model": model, "acc": acc})
    finally:
        subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env, capture_output=True, cwd=ROOT)
        shutil.rmtree(tmp, ignore_errors=True)
    loads.append(os.getloadavg())
    summary(rows, accuracy_rows, loads)
    print("load average (1/5/15 min) at the end: {:.2f} {:.2f} {:.2f}".format(*loads[-1]))


if __name__ == "__main__":
    main()
