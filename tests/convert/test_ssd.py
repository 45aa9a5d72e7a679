"""An SSD-style net (PriorBox, Permute, Flatten, Concat, Normalize, Reshape,
Softmax, DetectionOutput) converts with pycaffe-equal shapes (and, without
pycaffe, the shapes Caffe's rules give in tests/caffe_models.py)."""
import os

import pytest

from tests.caffe_models import make_caffemodel as make_own_caffemodel
from tests.caffe_models import read_net, top_shapes
from tests.support import convert_api, import_caffe, ir_shapes, make_caffemodel

NET = os.path.join(os.path.dirname(__file__), "nets", "ssd_small.prototxt")


def test_ssd_shapes_follow_caffes_rules(tmp_path):
    weights = str(tmp_path / "ssd.caffemodel")
    make_own_caffemodel(NET, weights)
    net = read_net(NET)
    shapes = top_shapes(net)
    ours = ir_shapes(convert_api(input_model=weights, input_proto=NET))
    compared = 0
    for layer in net.layer:
        if layer.type not in ("Input", "DetectionOutput"):
            assert ours[layer.name] == [tuple(shapes[t]) for t in layer.top], layer.name
            compared += 1
    assert compared > 20 and ours["detection_out"] == [(1, 1, 50, 7)]


@pytest.mark.pycaffe
def test_ssd_shapes_equal_pycaffe(tmp_path):
    caffe = import_caffe()
    weights = str(tmp_path / "ssd.caffemodel")
    make_caffemodel(NET, weights)
    net = caffe.Net(NET, weights, caffe.TEST)
    net.forward()
    ref = {name: [tuple(net.blobs[t].data.shape) for t in net.top_names[name]] for name in net._layer_names}
    network = convert_api(input_model=weights, input_proto=NET)
    ours = ir_shapes(network)
    types = {layer.name: layer.type for layer in network.layers}
    for name, shapes in ours.items():
        if name == "detection_out":
            continue
        if name == "data":  # a net-level input, not a Caffe layer
            assert shapes == [tuple(net.blobs["data"].data.shape)]
            continue
        assert shapes == ref[name], name
    # Caffe sizes its DetectionOutput top to the detections it found; the IR holds the bound N*keep_top_k
    assert ours["detection_out"] == [(1, 1, 50, 7)]
    assert ref["detection_out"][0][3] == 7 and ref["detection_out"][0][2] <= 50
    assert types["conv1_norm"] == "Normalize" and types["mbox_priorbox"] == "Concat"
    assert types["conv1_norm_mbox_loc_perm"] == "Permute" and types["detection_out"] == "DetectionOutput"
    prior = network.layer_by_name("conv2_mbox_priorbox")
    assert prior.data["aspect_ratio"] == "2,3" and prior.data["max_size"] == "24" and prior.data["flip"] == "1"
    assert network.layer_by_name("conv1_norm_mbox_loc_perm").data["order"] == "0,2,3,1"
    assert network.layer_by_name("conv1_norm").blobs["weights"].size == 8
    det = network.layer_by_name("detection_out").data
    assert det["code_type"] == "caffe.PriorBoxParameter.CENTER_SIZE" and det["keep_top_k"] == "50"
