"""Wall time of `mo-core convert` vs OpenVINO 2024.6 `mo` on the same Caffe model.

Both run as fresh processes (what a user waits for), FP32, several times each,
interleaved so machine noise hits both alike. Prints a table and the ratio.

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
    theirs_cmd = [mo, "--input_model", weights, "--input_proto", proto, "--output_dir", os.path.join(out, "ov"),
                  "--compress_to_fp16=False", "--silent"]
    ours, theirs = [], []
    try:
        timed(ours_cmd), timed(theirs_cmd)  # warm the page cache for both
        for _ in range(args.runs):
            ours.append(timed(ours_cmd))
            theirs.append(timed(theirs_cmd))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    rows = [("mo-core convert", ours), ("openvino-dev 2024.6 mo", theirs)]
    print("model: {} ({:.1f} MB of weights), {} runs each, wall time of a fresh process".format(
        args.model, os.path.getsize(weights) / 1e6, args.runs))
    print("{:<26}{:>10}{:>10}{:>10}".format("tool", "median s", "min s", "max s"))
    for name, times in rows:
        print("{:<26}{:>10.2f}{:>10.2f}{:>10.2f}".format(name, statistics.median(times), min(times), max(times)))
    ratio = statistics.median(ours) / statistics.median(theirs)
    print("ratio mo-core / mo: {:.3f} (target <= 0.333): {}".format(ratio, "met" if ratio <= 1 / 3 else "NOT met"))


if __name__ == "__main__":
    main()
