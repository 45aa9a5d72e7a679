"""Runs an IR on the CPU daemon and the original Caffe model on pycaffe with the
same random input, and prints the largest difference of every output.

    python scripts/compare_with_caffe.py IR.xml MODEL.prototxt MODEL.caffemodel
"""
import os
import sys

import numpy as np

os.environ.setdefault("GLOG_minloglevel", "2")


def main(xml, proto, weights):
    import caffe  # this script is a pycaffe tool, not part of the core
    from device_daemons.client import IECore
    ie = IECore(policy="auto")
    net = ie.read_network(model=xml)
    exec_net = ie.load_network(net, "CPU")
    rng = np.random.default_rng(0)
    inputs = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in net.inputs.items()}
    ours = exec_net.infer(inputs)
    ref_net = caffe.Net(proto, weights, caffe.TEST)
    for name, value in inputs.items():
        ref_net.blobs[name].reshape(*value.shape)
        ref_net.blobs[name].data[...] = value
    ref_net.forward()
    worst = 0.0
    for name, value in ours.items():
        top = ref_net.top_names[name][0]
        ref = ref_net.blobs[top].data
        diff = float(np.abs(value - ref).max() / max(np.abs(ref).max(), 1e-12))
        worst = max(worst, diff)
        print("output {:<12} shape {}  max |daemon - pycaffe| / max |pycaffe| = {:.2e}".format(
            name, tuple(value.shape), diff))
    print("matches pycaffe" if worst < 1e-4 else "DIFFERS from pycaffe")
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
