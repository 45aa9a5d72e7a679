"""The caffemodel wire-format reader on untrusted bytes: truncations and random
corruption of a real caffemodel give a clear FrameworkError or a result, never
another exception; a good file reads the same blobs as pycaffe."""
import os

import numpy as np
import pytest

from core.errors import FrameworkError
from core.front.caffe.weights import blob_array, read_caffemodel_blobs
from tests.caffe_models import make_caffemodel as make_own_caffemodel
from tests.support import import_caffe, make_caffemodel

NET = os.path.join(os.path.dirname(__file__), "nets", "conv_bn_scale.prototxt")


@pytest.mark.pycaffe
def test_blobs_equal_pycaffe(tmp_path):
    caffe = import_caffe()
    weights = str(tmp_path / "m.caffemodel")
    make_caffemodel(NET, weights, positive=("conv1_bn", "conv1_scale", "fc_bn"))
    net = caffe.Net(NET, weights, caffe.TEST)
    blobs = read_caffemodel_blobs(weights, 1 << 30)
    for name, params in net.params.items():
        assert len(blobs[name]) == len(params)
        for ours, ref in zip(blobs[name], params):
            np.testing.assert_array_equal(blob_array(ours, name), ref.data)


def test_blobs_of_a_caffemodel_made_without_pycaffe(tmp_path):
    weights = str(tmp_path / "m.caffemodel")
    made = make_own_caffemodel(NET, weights, positive=("conv1_bn", "conv1_scale", "fc_bn"))
    blobs = read_caffemodel_blobs(weights, 1 << 30)
    assert {name for name, b in blobs.items() if b} == set(made)  # layers without blobs list none
    for name, arrays in made.items():
        assert [blob_array(b, name).shape for b in blobs[name]] == [a.shape for a in arrays]
        for ours, ref in zip(blobs[name], arrays):
            np.testing.assert_array_equal(blob_array(ours, name), ref)


def test_corrupted_files_fail_cleanly(tmp_path):
    weights = str(tmp_path / "m.caffemodel")
    make_own_caffemodel(NET, weights, positive=("conv1_bn", "conv1_scale", "fc_bn"))
    good = open(weights, "rb").read()
    rng = np.random.default_rng(0)
    bad = str(tmp_path / "bad.caffemodel")
    outcomes = {"ok": 0, "error": 0}
    for i in range(400):
        data = bytearray(good)
        if i % 2:
            data = data[: rng.integers(0, len(data))]
        else:
            for _ in range(rng.integers(1, 8)):
                data[rng.integers(0, len(data))] = rng.integers(0, 256)
        with open(bad, "wb") as f:
            f.write(bytes(data))
        try:
            for name, blobs in read_caffemodel_blobs(bad, 1 << 30).items():
                for blob in blobs:
                    try:
                        blob_array(blob, name)
                    except FrameworkError:
                        pass
            outcomes["ok"] += 1
        except FrameworkError as exc:
            assert "bad.caffemodel" in str(exc)
            outcomes["error"] += 1
    assert outcomes["error"] > 50 and sum(outcomes.values()) == 400


def test_size_limit(tmp_path):
    weights = str(tmp_path / "m.caffemodel")
    make_own_caffemodel(NET, weights, positive=("conv1_bn", "conv1_scale", "fc_bn"))
    try:
        read_caffemodel_blobs(weights, 100)
    except FrameworkError as exc:
        assert "larger than the 100 bytes" in str(exc)
    else:
        raise AssertionError("the size limit was not applied")
