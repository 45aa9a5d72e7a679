"""Re-creates models/demo/demo_net.caffemodel with real pycaffe (random weights;
BatchNorm statistics and Scale factors kept positive so the net is well-formed)."""
import os

import numpy as np

os.environ.setdefault("GLOG_minloglevel", "2")
import caffe  # noqa: E402  (this script is a pycaffe tool, not part of the core)

here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models", "demo")
net = caffe.Net(os.path.join(here, "demo_net.prototxt"), caffe.TEST)
rng = np.random.default_rng(2026)
for name, blobs in net.params.items():
    for blob in blobs:
        positive = name.endswith(("_bn", "_scale"))
        blob.data[...] = rng.uniform(0.5, 1.5, blob.data.shape) if positive else rng.normal(0, 0.2, blob.data.shape)
net.save(os.path.join(here, "demo_net.caffemodel"))
print("wrote", os.path.join(here, "demo_net.caffemodel"))
