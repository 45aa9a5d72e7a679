"""Wall time of `mo-core convert` vs the reference converters on the same model.

Models: the Caffe sdist's GoogLeNet (bvlc_googlenet, vs OpenVINO 2024.6 `mo`) and
the Keras ResNet50 frozen graph of tests/tf/keras_apps.py (keras_resnet50, vs `mo`
of openvino-dev 2024.6 with TensorFlow in its own venv, and `ovc` of the OpenVINO
2026 runtime; --legacy adds mo's legacy Python front end). mo-core writes IR v2 (its default)
and IR v11 (`--ir_version 11`); the references write IR v11, so the ratios compare
mo-core's IR v11 run with them (the same output), and the table shows both
mo-core runs with each tool's IR version. Identical work for every tool: the same file, batch 1, FP32 output, each run a fresh process (what a
user waits for), several runs interleaved so machine noise hits all alike. One
more mo-core run reports where its time goes: start-up, imports, parse, the
passes, write.

    python benchmarks/convert.py [--model keras_resnet50|bvlc_googlenet|all] [--runs 3] [--legacy]
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
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from benchmarks.references import bvlc_model, keras_model, openvino_mo, openvino_ovc  # noqa: E402


def timed(cmd, env=None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit("command failed: {}\n{}".format(" ".join(cmd), proc.stderr[-2000:]))
    return elapsed


def _caffe_input_dims(proto: str) -> list[str]:
    """The input dims a deploy prototxt declares (its first `dim:` values)."""
    with open(proto) as f:
        dims = re.findall(r"\bdim:\s*(\d+)", f.read())[:4]
    if len(dims) != 4:
        raise SystemExit("cannot find the 4 input dims in {}".format(proto))
    return dims


def commands(model: str, out: str, legacy: bool = False) -> tuple[list, list]:
    """[(name, cmd)] of the tools to compare, and mo-core's convert arguments."""
    mo = openvino_mo(tensorflow=model == "keras_resnet50")
    if model == "keras_resnet50":
        pb = keras_model("resnet50")
        ours = ["--input_model", pb, "-b", "1"]
        ref = [("openvino-dev 2024.6 mo", [mo, "--input_model", pb, "--input_shape", "[1,224,224,3]",
                                            "--output_dir", os.path.join(out, "mo"), "--compress_to_fp16=False",
                                            "--silent"]),
               ("ovc (openvino 2026)", [openvino_ovc(), pb, "--input", "[1,224,224,3]", "--output_model",
                                        os.path.join(out, "ovc", "model.xml"), "--compress_to_fp16=False"])]
        if legacy:  # the Python Model Optimizer front end the reference guide describes (slow: minutes)
            ref.append(("mo --use_legacy_frontend", [mo, "--input_model", pb, "--input_shape", "[1,224,224,3]",
                                                     "--output_dir", os.path.join(out, "legacy"),
                                                     "--compress_to_fp16=False", "--silent",
                                                     "--use_legacy_frontend"]))
    else:
        proto, weights = bvlc_model(model)
        ours = ["--input_model", weights, "--input_proto", proto, "-b", "1"]
        # mo refuses -b for a shape the model defines (the sdist's deploy nets say batch 10)
        shape = "[1,{}]".format(",".join(_caffe_input_dims(proto)[1:]))
        ref = [("openvino-dev 2024.6 mo", [mo, "--input_model", weights, "--input_proto", proto, "--input_shape",
                                            shape, "--output_dir", os.path.join(out, "mo"),
                                            "--compress_to_fp16=False", "--silent"])]
    cli = [sys.executable, "-m", "cli", "convert"]
    tools = [(OURS_V2, cli + ours + ["--output_dir", os.path.join(out, "ours"), "--silent"]),
             (OURS_V11, cli + ours + ["--output_dir", os.path.join(out, "v11"), "--silent", "--ir_version", "11"])]
    return tools + ref, ours


OURS_V2, OURS_V11 = "mo-core convert", "mo-core --ir_version 11"


def _ir_version(cmd) -> str:
    """The version attribute of the <net> a tool wrote."""
    d = cmd[cmd.index("--output_dir") + 1] if "--output_dir" in cmd else os.path.dirname(
        cmd[cmd.index("--output_model") + 1])
    xml = next(os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".xml"))
    with open(xml) as f:
        found = re.search(r'<net\b[^>]*\bversion="(\d+)"', f.read(4096))
    return "v" + found.group(1) if found else "?"


def _ir_bytes(cmd) -> int:
    """Size of the .xml + .bin a tool wrote (its output directory)."""
    if "--output_dir" in cmd:
        d = cmd[cmd.index("--output_dir") + 1]
    else:
        d = os.path.dirname(cmd[cmd.index("--output_model") + 1])
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith((".xml", ".bin")))


# --- where mo-core's time goes ------------------------------------------------------------
def split_run(args) -> None:
    """(in a fresh process) convert + write with a clock around each part; prints JSON."""
    start = time.perf_counter()
    from core.pipeline import ConvertOptions, convert  # noqa: F401  (the imports every convert makes)
    import cli.main  # noqa: F401
    from ir import write_ir
    imported = time.perf_counter()
    out = args[args.index("--output_dir") + 1]
    options = ConvertOptions(input_model=args[args.index("--input_model") + 1], batch=1, output_dir=out,
                             input_proto=args[args.index("--input_proto") + 1] if "--input_proto" in args else None)
    ctx = convert(options)
    converted = time.perf_counter()
    write_ir(ctx.network, os.path.join(out, ctx.network.name + ".xml"))
    done = time.perf_counter()
    parse = sum(t for name, t in ctx.timings if name == "load_model")
    print(json.dumps({"imports": imported - start, "parse": parse, "passes": converted - imported - parse,
                      "write": done - converted, "steps": ctx.timings}))


def time_split(ours: list, out: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--split"] + ours + ["--output_dir", os.path.join(out, "split")]
    os.makedirs(os.path.join(out, "split"), exist_ok=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit("the split run failed:\n" + proc.stderr[-2000:])
    parts = json.loads(proc.stdout.strip().splitlines()[-1])
    parts["start-up and exit"] = wall - sum(parts[k] for k in ("imports", "parse", "passes", "write"))
    parts["wall"] = wall
    return parts


def bench(model: str, runs: int, legacy: bool) -> None:
    out = tempfile.mkdtemp(prefix="mo-bench-")
    try:
        tools, ours = commands(model, out, legacy)
        for _, cmd in tools:  # warm the page cache (and each tool's own caches) once
            timed(cmd)
        times = {name: [] for name, _ in tools}
        for _ in range(runs):
            for name, cmd in tools:
                times[name].append(timed(cmd))
        sizes = {name: _ir_bytes(cmd) for name, cmd in tools}
        versions = {name: _ir_version(cmd) for name, cmd in tools}
        split = time_split(ours, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    source = ours[1]
    print("\nmodel: {} ({}, {:.1f} MB), batch 1, FP32, {} runs each, wall time of a fresh process".format(
        model, os.path.basename(source), os.path.getsize(source) / 1e6, runs))
    print("{:<28}{:>5}{:>10}{:>10}{:>10}{:>8}".format("tool", "IR", "median s", "min s", "max s", "IR MB"))
    for name, values in times.items():
        print("{:<28}{:>5}{:>10.2f}{:>10.2f}{:>10.2f}{:>8.1f}".format(
            name, versions[name], statistics.median(values), min(values), max(values), sizes[name] / 1e6))
    ours_median = statistics.median(times[OURS_V11])
    for name in times:
        if not name.startswith("mo-core"):
            if versions[name] != versions[OURS_V11]:
                raise SystemExit(f"{name} wrote IR {versions[name]}, mo-core {versions[OURS_V11]}: not the same work")
            ratio = ours_median / statistics.median(times[name])
            note = " (target <= 0.333: {})".format("met" if ratio <= 1 / 3 else "NOT met") if \
                name == "openvino-dev 2024.6 mo" else ""
            print("ratio {} / {} (both IR {}): {:.3f}{}".format(OURS_V11, name, versions[name], ratio, note))
    print("mo-core's time ({:.2f} s in this run): start-up and exit {:.2f}, imports {:.2f}, parse {:.2f}, "
          "passes {:.2f}, write {:.2f}".format(split["wall"], split["start-up and exit"], split["imports"],
                                                split["parse"], split["passes"], split["write"]))
    slowest = sorted(split["steps"], key=lambda s: -s[1])[:5]
    print("  slowest passes: " + ", ".join("{} {:.2f}".format(name, t) for name, t in slowest))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--split":
        return split_run(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all", choices=["all", "keras_resnet50", "bvlc_googlenet"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--legacy", action="store_true",
                        help="also time mo --use_legacy_frontend on the TensorFlow model (minutes a run)")
    args = parser.parse_args()
    for model in (["keras_resnet50", "bvlc_googlenet"] if args.model == "all" else [args.model]):
        bench(model, args.runs, args.legacy)
    return None


if __name__ == "__main__":
    main()
