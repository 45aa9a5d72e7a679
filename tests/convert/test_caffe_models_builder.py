"""tests/caffe_models.py (caffemodels without pycaffe) against real Caffe: the blob
shapes it works out are pycaffe's, and pycaffe reads the files it writes."""
import os

import numpy as np
import pytest

from tests.caffe_models import blob_shapes, make_caffemodel, read_net
from tests.support import BVLC, import_caffe, sdist_prototxt

pytestmark = pytest.mark.pycaffe
HERE = os.path.dirname(os.path.abspath(__file__))
NETS = [sdist_prototxt(name) for name in BVLC] + [os.path.join(HERE, "nets", name)
                                                  for name in ("conv_bn_scale.prototxt", "ssd_small.prototxt")]


@pytest.mark.parametrize("proto", NETS, ids=lambda p: p.split("/")[-2 if p.endswith("deploy.prototxt") else -1])
def test_blob_shapes_and_files_are_pycaffes(proto, tmp_path):
    caffe = import_caffe()
    weights = str(tmp_path / "m.caffemodel")
    made = make_caffemodel(proto, weights, scale=None)
    net = caffe.Net(proto, weights, caffe.TEST)
    assert blob_shapes(read_net(proto)) == {name: [tuple(b.data.shape) for b in blobs]
                                            for name, blobs in net.params.items()}
    for name, blobs in net.params.items():
        for ours, theirs in zip(made[name], blobs):
            np.testing.assert_array_equal(ours, theirs.data)
