"""Wall time of `mo-core convert` vs OpenVINO 2024.6 `mo` on the same Caffe model.

mo-core writes IR v2 (its default) and IR v11 (`--ir_version 11`, what `mo` writes
too); every run is a fresh process (what a user waits for), FP32, several times
each, interleaved so machine noise hits all alike. Prints a table and the ratios.

    python benchmarks/convert.py [--model bvlc_googlenet] [--runs 5]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.references import bvlc_model, openvino_mo  # noqa: E402


def timed(cmd) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit("command failed: {}\n{}".format(" ".join(cmd), proc.stderr[-2000:]))
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bvlc_googlenet")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    proto, weights = bvlc_model(args.model)
    mo = openvino_mo()
    out = tempfile.mkdtemp(prefix="mo-bench-")
    ours_cmd = [sys.executable, "-m", "cli", "convert", "--input_model", weights, "--input_proto", proto,
                "-b", "1", "--output_dir", os.path.join(out, "ours"), "--silent"]
    v11_cmd = ours_cmd[:-2] + [os.path.join(out, "v11"), "--silent", "--ir_version", "11"]
    theirs_cmd = [mo, "--input_model", weights, "--input_proto", proto, "--output_dir", os.path.join(out, "ov"),
                  "--compress_to_fp16=False", "--silent"]
    ours, v11, theirs = [], [], []
    try:
        timed(ours_cmd), timed(v11_cmd), timed(theirs_cmd)  # warm the page cache for all
        for _ in range(args.runs):
            ours.append(timed(ours_cmd))
            v11.append(timed(v11_cmd))
            theirs.append(timed(theirs_cmd))
        sizes = {name: sum(os.path.getsize(os.path.join(out, name, f)) for f in os.listdir(os.path.join(out, name)))
                 for name in ("ours", "v11", "ov")}
    finally:
        shutil.rmtree(out, ignore_errors=True)
    rows = [("mo-core convert (IR v2)", ours, sizes["ours"]), ("mo-core --ir_version 11", v11, sizes["v11"]),
            ("openvino-dev 2024.6 mo", theirs, sizes["ov"])]
    print("model: {} ({:.1f} MB of weights), {} runs each, wall time of a fresh process".format(
        args.model, os.path.getsize(weights) / 1e6, args.runs))
    print("{:<26}{:>10}{:>10}{:>10}{:>12}".format("tool", "median s", "min s", "max s", "IR MB"))
    for name, times, size in rows:
        print("{:<26}{:>10.2f}{:>10.2f}{:>10.2f}{:>12.1f}".format(name, statistics.median(times), min(times), max(times),
                                                              size / 1e6))
    ratio = statistics.median(ours) / statistics.median(theirs)
    print("ratio mo-core / mo: {:.3f} (target <= 0.333): {}".format(ratio, "met" if ratio <= 1 / 3 else "NOT met"))
    print("ratio mo-core --ir_version 11 / mo (both write IR v11): {:.3f}".format(
        statistics.median(v11) / statistics.median(theirs)))


if __name__ == "__main__":
    main()
