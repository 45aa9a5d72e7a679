"""Memory of the CPU daemon on GoogLeNet (issue 13's memory goal):

    peak RSS <= weights + 2 x (the two largest activations) + a fixed overhead

    python benchmarks/memory.py [--model bvlc_googlenet] [--batch 1] [--iterations 20]
                                [--backends onednn,numpy] [--mappings 8]
                                [--kinds-size 32]

Each backend gets its own private daemon (a fresh runtime directory,
MO_CORE_CPU_BACKEND set), the same IR (our converter, He-scaled weights made once by
pycaffe, batch --batch) and the same input (seed 0). The daemon's /proc/<pid>/status
and smaps_rollup are read at each stage:

  idle      the daemon started, nothing loaded
  runtime   after a 1x3x224x224 Input -> ReLU network was loaded and run once: the
            backend's library initialised (oneDNN: libdnnl, libgomp, the cffi
            declarations, OpenMP threads); numpy's BLAS threads
  kinds     after a miniature network (1x3x32x32 by default, 8-16 channels, one layer
            of each kind GoogLeNet has: 7x7/2, 1x1, 3x3, 5x5 convolutions, max and
            average pooling, LRN, Concat, InnerProduct, Softmax) was loaded, run and
            unloaded: the library code a network of these kinds touches, whatever its
            size (oneDNN: pages of libdnnl's 44 MB of code). The daemon keeps the
            unloaded miniature in its idle cache: its weights and arena (kilobytes)
            are in this figure and in the peaks alike
  loaded    after load_network of the model (VmHWM: the peak while loading)
  infer     after --iterations inferences (VmHWM reset first through
            /proc/<pid>/clear_refs, so this is the peak while inferring)

Fixed overhead = RSS at "kinds": what any network of these layer kinds pays
(interpreter, ZeroMQ, numpy, the backend's library, its code for these layers);
the goal is also printed against RSS at "runtime" (Input -> ReLU only). Weights =
the IR's .bin (float32). Activations = the two largest outputs of non-Const layers
at that batch. The goal's peak is the larger of the two peaks (loading and
inferring). For oneDNN the growth over the fixed overhead is split into the
program's weights (in oneDNN's layouts), arena and scratchpad (the same program
compiled in this process) and the rest; per-mapping growth (smaps) from "kinds" to
"infer" shows where memory went.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MB = 1 << 20
STATUS_KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")
ROLLUP_KEYS = ("Rss", "Anonymous", "Private_Dirty", "Shared_Clean", "Private_Clean")


def _kb_fields(path, keys):
    out = {}
    with open(path) as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in keys:
                out[name] = int(rest.split()[0]) * 1024
    return out


def mappings(pid):
    """Resident bytes per mapping name (a path, [heap], [anon], [stack]...)."""
    out, name = {}, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if not head:
                continue
            if "-" in head[0] and not head[0].endswith(":"):
                name = head[5] if len(head) > 5 else "[anon]"
                if name.startswith("/memfd:"):
                    name = "/memfd:" + name[7:].split(" ")[0]
                continue
            if head[0] == "Rss:":
                out[name] = out.get(name, 0) + int(head[1]) * 1024
    return out


def snapshot(pid):
    snap = _kb_fields(f"/proc/{pid}/status", STATUS_KEYS)
    snap.update(_kb_fields(f"/proc/{pid}/smaps_rollup", ROLLUP_KEYS))
    snap["threads"] = len(os.listdir(f"/proc/{pid}/task"))
    snap["mappings"] = mappings(pid)
    return snap


def reset_peak(pid):
    """VmHWM := VmRSS (Linux >= 4.0: writing 5 to clear_refs)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def measure_backend(args):
    """In a fresh process: one private daemon on one backend; prints JSON."""
    os.environ["MO_CORE_CPU_BACKEND"] = args.backend
    from device_daemons.client import IECore
    from ir import read_ir
    ie = IECore(policy="auto")
    pid = ie.daemon_pid("CPU")
    stages = {"idle": snapshot(pid)}
    relu = ie.load_network(ie.read_network(model=args.relu_xml), "CPU")
    relu.infer({"data": np.zeros((1, 3, 224, 224), np.float32)})
    stages["runtime"] = snapshot(pid)
    kinds = ie.load_network(ie.read_network(model=args.kinds_xml), "CPU")
    kinds.infer({"data": np.zeros(tuple(read_ir(args.kinds_xml).inputs()[0].outputs[0].dims), np.float32)})
    kinds.close()  # unloaded: what stays is the library's, not this network's
    stages["kinds"] = snapshot(pid)
    reset_peak(pid)
    network = read_ir(args.xml)
    name = network.inputs()[0].name
    x = np.random.default_rng(0).standard_normal(tuple(network.inputs()[0].outputs[0].dims)).astype(np.float32)
    exec_net = ie.load_network(ie.read_network(model=args.xml), "CPU")
    stages["loaded"] = snapshot(pid)
    reset_peak(pid)
    for _ in range(args.iterations):
        exec_net.infer({name: x})
    stages["infer"] = snapshot(pid)
    # what the daemon compiled the model at (its load reply): the breakdown compiles the same
    print(json.dumps({"pid": pid, "stages": stages, "precision": exec_net.get_config("INFERENCE_PRECISION_HINT"),
                      "threads": exec_net.get_config("INFERENCE_NUM_THREADS")}))


def ir_terms(xml):
    from ir import read_ir
    network = read_ir(xml)
    weights = os.path.getsize(os.path.splitext(xml)[0] + ".bin")
    sizes = sorted((int(np.prod(p.dims)) * 4 for layer in network.layers if layer.type != "Const"
                    for p in layer.outputs), reverse=True)
    return weights, sizes[:2]


KINDS_PROTO = """name: "kinds"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: SIZE dim: SIZE } } }
layer { name: "c7" type: "Convolution" bottom: "data" top: "c7"
  convolution_param { num_output: 16 kernel_size: 7 stride: 2 pad: 3 } }
layer { name: "r7" type: "ReLU" bottom: "c7" top: "c7" }
layer { name: "p1" type: "Pooling" bottom: "c7" top: "p1" pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "n1" type: "LRN" bottom: "p1" top: "n1" lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 } }
layer { name: "c1" type: "Convolution" bottom: "n1" top: "c1" convolution_param { num_output: 16 kernel_size: 1 } }
layer { name: "r1" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "c3" type: "Convolution" bottom: "c1" top: "c3" convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
layer { name: "c5" type: "Convolution" bottom: "c1" top: "c5" convolution_param { num_output: 8 kernel_size: 5 pad: 2 } }
layer { name: "p3" type: "Pooling" bottom: "c1" top: "p3" pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }
layer { name: "cat" type: "Concat" bottom: "c3" bottom: "c5" bottom: "p3" top: "cat" }
layer { name: "avg" type: "Pooling" bottom: "cat" top: "avg" pooling_param { pool: AVE kernel_size: 7 stride: 7 } }
layer { name: "fc" type: "InnerProduct" bottom: "avg" top: "fc" inner_product_param { num_output: 10 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
"""


def kinds_ir(out_dir, size):
    """The miniature network of the "kinds" stage: random weights saved by pycaffe,
    converted by our converter like the model."""
    import caffe
    proto = os.path.join(out_dir, "kinds.prototxt")
    with open(proto, "w") as f:
        f.write(KINDS_PROTO.replace("SIZE", str(size)))
    net = caffe.Net(proto, caffe.TEST)
    rng = np.random.default_rng(0)
    for blobs in net.params.values():
        for blob in blobs:
            blob.data[...] = rng.standard_normal(blob.data.shape) * 0.1
    model = os.path.join(out_dir, "kinds.caffemodel")
    net.save(model)
    subprocess.run([sys.executable, "-m", "cli", "convert", "--input_model", model, "--input_proto", proto,
                    "--output_dir", out_dir, "--model_name", "kinds", "--silent"], check=True, cwd=ROOT)
    return os.path.join(out_dir, "kinds.xml")


def run_backend(backend, xml, relu_xml, kinds_xml, iterations):
    runtime = tempfile.mkdtemp(prefix="mo-mem-")
    env = dict(os.environ, MO_CORE_RUNTIME_DIR=runtime, PYTHONPATH=ROOT)
    cmd = [sys.executable, os.path.abspath(__file__), "--measure", "--backend", backend, "--xml", xml,
           "--relu-xml", relu_xml, "--kinds-xml", kinds_xml, "--iterations", str(iterations)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    finally:
        subprocess.run([sys.executable, "-m", "cli", "daemon", "stop", "--all"], env=env, capture_output=True,
                       cwd=ROOT)
        shutil.rmtree(runtime, ignore_errors=True)
    if proc.returncode:
        raise SystemExit(f"the {backend} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def mb(value):
    return f"{value / MB:7.1f}"


def program_terms(xml, precision, threads):
    """(weights in oneDNN's layouts, arena, scratchpad) in bytes: the same program the
    daemon compiles, compiled here at the precision and threads its load reply gave
    (deterministic: same IR, shapes, precision and library; bf16 halves the weights)."""
    from device_daemons.cpu.onednn import op
    from device_daemons.cpu.plan import ExecutionPlan
    from ir import read_ir
    network = read_ir(xml)
    plan = ExecutionPlan(network, backend="onednn", precision=precision, threads=threads)
    if plan.precision_used != precision:
        raise SystemExit(f"the breakdown's program compiled at {plan.precision_used}, the daemon's at {precision}")
    constants = sum(m.desc.size for e in op._CONSTANTS.get(id(network), {}).values() for _, m in e)
    return constants, plan.program.arena.nbytes, plan.program.scratchpad.nbytes


def verdict(peak, allowed):
    return f"{'met' if peak <= allowed else 'not met'} ({peak / MB:.1f} vs {allowed / MB:.1f} MB, " \
           f"margin {(allowed - peak) / MB:+.1f} MB)"


def report(backend, result, weights, largest, top, program=None):
    s = result["stages"]
    print(f"\n== {backend} backend (daemon pid {result['pid']}, precision {result['precision']}, "
          f"{result['threads']} threads: the daemon's load reply{'; the breakdown compiled alike' if program else ''})")
    print(f"{'stage':<9} {'VmRSS':>7} {'VmHWM':>7} {'anon':>7} {'file':>7} {'shmem':>7} {'threads':>7}  (MB)")
    for stage in ("idle", "runtime", "kinds", "loaded", "infer"):
        v = s[stage]
        print(f"{stage:<9} {mb(v['VmRSS'])} {mb(v['VmHWM'])} {mb(v['RssAnon'])} {mb(v['RssFile'])} "
              f"{mb(v['RssShmem'])} {v['threads']:7d}")
    fixed, fixed_relu = s["kinds"]["VmRSS"], s["runtime"]["VmRSS"]
    peak_load, peak_infer = s["loaded"]["VmHWM"], s["infer"]["VmHWM"]
    peak = max(peak_load, peak_infer)
    model = weights + 2 * sum(largest)
    print(f"weights (.bin)                                     {mb(weights)}")
    print(f"2 x two largest activations (2 x ({largest[0] / MB:.2f} + {largest[1] / MB:.2f}))     "
          f"{mb(2 * sum(largest))}")
    print(f"fixed overhead: RSS at 'kinds'                     {mb(fixed)}")
    print(f"  idle daemon                                      {mb(s['idle']['VmRSS'])}")
    print(f"  backend init (runtime - idle)                    {mb(fixed_relu - s['idle']['VmRSS'])}")
    print(f"  code/kernels of the layer kinds (kinds - runtime){mb(fixed - fixed_relu)}")
    print(f"peak while loading {mb(peak_load)}, while inferring {mb(peak_infer)}")
    grown = peak - fixed
    print(f"peak - fixed                                       {mb(grown)}  (allowed {mb(model).strip()})")
    if program is not None:
        constants, arena, scratchpad = program
        anon = s["infer"]["RssAnon"] - s["kinds"]["RssAnon"]
        files = s["infer"]["RssFile"] - s["kinds"]["RssFile"]
        print(f"  weights in oneDNN's layouts                      {mb(constants)}")
        print(f"  activation arena                                 {mb(arena)}")
        print(f"  scratchpad                                       {mb(scratchpad)}")
        print(f"  other anonymous (oneDNN primitives, JIT code, Python objects, buffers) "
              f"{mb(anon - constants - arena - scratchpad)}")
        print(f"  file-backed (library code, the IR's .bin)        {mb(files)}")
    goals = {"stated": verdict(peak, model + fixed), "strict": verdict(peak, model + fixed_relu)}
    print(f"goal (fixed = RSS at 'kinds'):            {goals['stated']}")
    print(f"goal (fixed = RSS at 'runtime', ReLU net): {goals['strict']}")
    before, after = s["kinds"]["mappings"], s["infer"]["mappings"]
    growth = sorted(((after.get(k, 0) - before.get(k, 0), k) for k in set(before) | set(after)), reverse=True)
    print(f"resident growth kinds -> infer, per mapping (top {top}):")
    for delta, name in growth[:top]:
        if delta:
            print(f"  {mb(delta)}  {name}")
    return goals


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="bvlc_googlenet")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--backends", default="onednn,numpy")
    parser.add_argument("--mappings", type=int, default=8)
    parser.add_argument("--kinds-size", type=int, default=32, help="input size of the miniature network")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--xml", help=argparse.SUPPRESS)
    parser.add_argument("--relu-xml", help=argparse.SUPPRESS)
    parser.add_argument("--kinds-xml", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        return measure_backend(args)
    from benchmarks.infer import convert_ours, trivial_ir
    out = tempfile.mkdtemp(prefix="mo-mem-ir-")
    try:
        xml = convert_ours(args.model, out, args.model, args.batch)
        relu_xml = trivial_ir(out)
        kinds_xml = kinds_ir(out, args.kinds_size)
        weights, largest = ir_terms(xml)
        print(f"{args.model}, batch {args.batch}, input seed 0, {args.iterations} inferences; "
              f"load average {os.getloadavg()[0]:.1f}")
        met = {}
        for b in args.backends.split(","):
            result = run_backend(b, xml, relu_xml, kinds_xml, args.iterations)
            program = program_terms(xml, result["precision"], result["threads"]) if b == "onednn" else None
            met[b] = report(b, result, weights, largest, args.mappings, program)
        print("\nmemory goal, fixed overhead = the daemon after the miniature net of GoogLeNet's layer kinds: "
              + "; ".join(f"{b} {goals['stated']}" for b, goals in met.items()))
        print("memory goal, strict baseline = the idle daemon after an Input->ReLU net: "
              + "; ".join(f"{b} {goals['strict']}" for b, goals in met.items()))
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
