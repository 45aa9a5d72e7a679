"""Cost of the Caffe fallback: converting a net with N custom layers through
CustomLayersMapping.xml + --use-caffe-fallback (one Caffe worker, one net build,
one forward for all N) vs through Python extensions (no Caffe at all).

    python benchmarks/fallback.py [--layers 10] [--runs 5]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

EXT_OP = '''from core.ops.op import Op
class BNLLOp(Op):
    op = "BNLL"
    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "BNLL", "op": "BNLL", "infer": BNLLOp.infer}, attrs)
    @staticmethod
    def infer(node):
        node.out_node(0).shape = node.in_node(0).shape.copy()
'''
EXT_FRONT = '''from core.front.extractor import FrontExtractorOp
from core.ops.op import Op
class BNLLExtractor(FrontExtractorOp):
    op = "BNLL"
    @staticmethod
    def extract(node):
        Op.get_op_class_by_name("BNLL").update_node_stat(node, {})
        return True
'''


def build(tmp, n):
    lines = ['layer { name: "data" type: "Input" top: "x0" input_param { shape { dim: 1 dim: 16 dim: 56 dim: 56 } } }']
    for i in range(n):
        lines.append('layer {{ name: "conv{0}" type: "Convolution" bottom: "x{0}" top: "c{0}" '
                     'convolution_param {{ num_output: 16 kernel_size: 3 pad: 1 }} }}'.format(i))
        lines.append('layer {{ name: "bnll{0}" type: "BNLL" bottom: "c{0}" top: "x{1}" }}'.format(i, i + 1))
    proto = os.path.join(tmp, "net.prototxt")
    open(proto, "w").write("\n".join(lines) + "\n")
    os.environ.setdefault("GLOG_minloglevel", "2")
    import caffe
    net = caffe.Net(proto, caffe.TEST)
    for blobs in net.params.values():
        for b in blobs:
            b.data[...] = np.random.default_rng(0).normal(0, 0.1, b.data.shape)
    weights = os.path.join(tmp, "net.caffemodel")
    net.save(weights)
    ext = os.path.join(tmp, "ext")
    os.makedirs(os.path.join(ext, "ops"))
    os.makedirs(os.path.join(ext, "front", "caffe"))
    open(os.path.join(ext, "ops", "bnll.py"), "w").write(EXT_OP)
    open(os.path.join(ext, "front", "caffe", "bnll_ext.py"), "w").write(EXT_FRONT)
    mapping = os.path.join(tmp, "map.xml")
    open(mapping, "w").write('<CustomLayersMapping><CustomLayer NativeType="BNLL" hasParam="false"/>'
                             '</CustomLayersMapping>')
    return proto, weights, ext, mapping


def timed(cmd):
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(proc.stderr)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proto, weights, ext, mapping = build(tmp, args.layers)
        base = [sys.executable, "-m", "cli", "convert", "--input_model", weights, "--input_proto", proto,
                "--output_dir", os.path.join(tmp, "out"), "--silent", "--log_level", "ERROR"]
        variants = [("extensions", base + ["--extensions", ext]),
                    ("mapping + caffe fallback", base + ["-k", mapping, "--use-caffe-fallback"])]
        times = {name: [] for name, _ in variants}
        for name, cmd in variants:
            timed(cmd)
        for _ in range(args.runs):
            for name, cmd in variants:
                times[name].append(timed(cmd))
    print("{} custom layers (BNLL) in a net of {} convolutions; {} runs; wall time of a fresh process".format(
        args.layers, args.layers, args.runs))
    print("{:<28}{:>10}{:>10}".format("variant", "median s", "min s"))
    for name, t in times.items():
        print("{:<28}{:>10.2f}{:>10.2f}".format(name, statistics.median(t), min(t)))
    extra = statistics.median(times["mapping + caffe fallback"]) - statistics.median(times["extensions"])
    print("fallback costs {:.2f} s more: one Caffe worker start, one net build, one forward for all {} layers".format(
        extra, args.layers))


if __name__ == "__main__":
    main()
