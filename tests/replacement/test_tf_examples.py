"""The reference guide's replacement examples on TensorFlow graphs built by real
TensorFlow (tests/replacement/tf_graphs.py, in a subprocess, cached), converted
without TensorFlow and run on the CPU daemon:
- SquaredDifference by op replacement (Power, Eltwise, Power), equal to TF within 1e-4;
- MVN by the guide's pattern on tf.nn.moments + FusedBatchNorm, equal to TF within 1e-4;
- InceptionBlock by scope on three Inception-like blocks (the guide's configuration
  file; the _update option writes the inputs/outputs the guide shows);
- an SSD-style Postprocessor (box decoding + per-class NMS) replaced by points with
  one DetectionOutput, whose detections equal TensorFlow's above the threshold.
"""
import json
import os

import numpy as np
import pytest

from core.errors import Error
from tests.replacement.conftest import EXT, HERE
from tests.replacement.test_config_files import network_text, write_json
from tests.support import convert_api, run_cli, write_text
from tests.tf.tf_helpers import compare_with_tf, convert_model, run_on_daemon

INCEPTION_CONFIG = [{
    "custom_attributes": {"attr1_key": "attr1_value", "attr2_key": 123456},
    "id": "InceptionBlockReplacer",
    "op": "InceptionBlock",
    "instances": [".*InceptionV4/Mixed_5b", ".*InceptionV4/Mixed_5c", ".*InceptionV4/Mixed_5d"],
    "match_kind": "scope",
}]


def test_squared_difference_op_replacement_equals_tensorflow(ie, tf_graphs, tmp_path):
    ext = os.path.join(EXT, "tf_squared_difference")
    network = convert_api(input_model=tf_graphs.path("squared_difference"), extensions=ext)
    names = {layer.name: layer.type for layer in network.layers}
    assert names["SquaredDifference/negate_"] == "Power" and names["SquaredDifference/squared_"] == "Power"
    assert names["SquaredDifference/add_"] == "Eltwise"
    compare_with_tf(ie, tf_graphs, "squared_difference", tmp_path, extensions=ext)


def test_mvn_pattern_on_tf_moments_equals_tensorflow(ie, tf_graphs, tmp_path):
    ext = os.path.join(EXT, "tf_mvn")
    network = convert_api(input_model=tf_graphs.path("mvn_moments"), extensions=ext)
    types = [layer.type for layer in network.layers]
    assert types.count("MVN") == 1 and "Pooling" not in types, types
    mvn = next(layer for layer in network.layers if layer.type == "MVN")
    assert [e.to_port for e in network.edges if e.to_layer == mvn.id] == [0]  # the reduction inputs went
    compare_with_tf(ie, tf_graphs, "mvn_moments", tmp_path, extensions=ext)


def test_without_the_mvn_pattern_the_moments_graph_does_not_convert(tf_graphs):
    with pytest.raises(Error, match="its scale, offset, mean or variance is computed from the model's data"):
        convert_api(input_model=tf_graphs.path("mvn_moments"))


# --- scope: InceptionBlock --------------------------------------------------------------
def test_inception_update_writes_the_guides_inputs_and_outputs(tf_graphs, tmp_path):
    config = write_json(tmp_path / "inception.json", INCEPTION_CONFIG)
    code, stdout, stderr = run_cli("convert", "--input_model", tf_graphs.path("inception_blocks"),
                                   "--tensorflow_custom_operations_config_update", config)
    assert code == 0, stderr
    with open(config) as f:
        data = json.load(f)
    assert data == [dict(INCEPTION_CONFIG[0], inputs=[[
        {"node": "Branch_0/Conv2d_0a_1x1/Conv2D$", "port": 0},
        {"node": "Branch_1/Conv2d_0a_1x1/Conv2D$", "port": 0},
        {"node": "Branch_2/Conv2d_0a_1x1/Conv2D$", "port": 0},
        {"node": "Branch_3/AvgPool_0a_3x3$", "port": 0},
    ]], outputs=[{"node": "concat$", "port": 0}])]


def inception_op_with_shapes(tmp_path) -> str:
    """The guide's InceptionBlock op plus a shape function (the block keeps its input's shape)."""
    (tmp_path / "ext" / "ops").mkdir(parents=True)
    write_text(str(tmp_path / "ext" / "ops" / "InceptionBlock.py"), (
        "from core.ops.op import Op, copy_shape_infer\n\n\n"
        "class InceptionBlock(Op):\n"
        "    op = 'InceptionBlock'\n\n"
        "    def __init__(self, graph, attrs):\n"
        "        super().__init__(graph, attrs, {'type': __class__.op, 'op': __class__.op, "
        "'infer': copy_shape_infer})\n"))
    return str(tmp_path / "ext")


def test_inception_blocks_by_scope_and_the_update_round_trip(tf_graphs, tmp_path):
    model = tf_graphs.path("inception_blocks")
    ext = inception_op_with_shapes(tmp_path)
    template = write_json(tmp_path / "template.json", INCEPTION_CONFIG)
    updated = write_json(tmp_path / "updated.json", INCEPTION_CONFIG)
    code, _, stderr = run_cli("convert", "--input_model", model, "--tensorflow_custom_operations_config_update",
                              updated)
    assert code == 0, stderr
    nets = [convert_api(input_model=model, extensions=ext, tensorflow_use_custom_operations_config=path)
            for path in (template, updated)]
    assert network_text(nets[0]) == network_text(nets[1])
    blocks = [layer for layer in nets[0].layers if layer.type == "InceptionBlock"]
    assert [b.name for b in blocks] == ["InceptionV4/Mixed_5b", "InceptionV4/Mixed_5c", "InceptionV4/Mixed_5d"]
    for block in blocks:  # NCHW in the IR, as the guide's IR shows
        assert [p.dims for p in block.inputs] == [(1, 16, 10, 10)] and [p.dims for p in block.outputs] == [
            (1, 16, 10, 10)]
    assert [layer.type for layer in nets[0].layers] == ["Input", "Convolution", "ReLU", "InceptionBlock",
                                                        "InceptionBlock", "InceptionBlock"]
    assert all(b.data == {"attr1_key": "attr1_value", "attr2_key": "123456"} for b in blocks)


def test_inception_block_without_shape_function_gets_its_shapes_from_the_tf_worker(tf_graphs, tmp_path, caplog):
    """The guide's InceptionBlock has no infer: as the reference did, TensorFlow computes the shapes of the
    sub-graphs the blocks replace (the TF worker, core/front/tf/fallback.py), all three in one round trip."""
    config = write_json(tmp_path / "inception.json", INCEPTION_CONFIG)
    with caplog.at_level("INFO", logger="mo_core"):
        network = convert_api(input_model=tf_graphs.path("inception_blocks"),
                              extensions=os.path.join(EXT, "tf_inception"),
                              tensorflow_use_custom_operations_config=config)
    blocks = [layer for layer in network.layers if layer.type == "InceptionBlock"]
    assert [b.name for b in blocks] == ["InceptionV4/Mixed_5b", "InceptionV4/Mixed_5c", "InceptionV4/Mixed_5d"]
    for block in blocks:  # NCHW in the IR, as the guide's IR shows
        assert [p.dims for p in block.inputs] == [(1, 16, 10, 10)] and [p.dims for p in block.outputs] == [
            (1, 16, 10, 10)]
    asked = [r.getMessage() for r in caplog.records if "TensorFlow's shape inference" in r.getMessage()]
    assert len(asked) == 1 and all(b.name in asked[0] for b in blocks), asked
    # the guide: custom_attributes are "static attributes of the layer to be dumped to the IR .xml file"
    assert [b.data for b in blocks] == [{"attr1_key": "attr1_value", "attr2_key": "123456"}] * 3


# --- points: the SSD post-processing ----------------------------------------------------
SSD_CONFIG = [{
    "custom_attributes": {"num_classes": 4, "share_location": True, "background_label_id": 0,
                          "code_type": "caffe.PriorBoxParameter.CENTER_SIZE", "variance_encoded_in_target": False,
                          "confidence_threshold": 0.2, "nms_threshold": 0.45, "top_k": 72, "keep_top_k": 20},
    "id": "TFObjectDetectionAPIDetectionOutput",
    "include_inputs_to_sub_graph": True,
    "include_outputs_to_sub_graph": True,
    "instances": {"end_points": ["detection_boxes", "detection_scores", "num_detections"],
                  "start_points": ["Postprocessor/loc", "Postprocessor/scores", "Postprocessor/anchors"]},
    "match_kind": "points",
}]
OUTPUTS = "detection_boxes,detection_scores,num_detections"   # the guide's --output for SSD


def test_ssd_postprocessor_by_points_detects_what_tensorflow_detects(ie, tf_graphs, tmp_path):
    config = write_json(tmp_path / "ssd.json", SSD_CONFIG)
    xml = convert_model(tf_graphs.path("ssd_postprocess"), tmp_path, "ssd", output=OUTPUTS,
                        extensions=os.path.join(EXT, "tf_ssd"), tensorflow_use_custom_operations_config=config)
    from ir import read_ir
    types = [layer.type for layer in read_ir(xml).layers]
    assert types.count("DetectionOutput") == 1 and types[-1] == "DetectionOutput", types
    arrays = tf_graphs.arrays("ssd_postprocess")
    _, out = run_on_daemon(ie, xml, {"x": arrays["in1/x"]})
    (dets,) = out.values()
    dets = dets.reshape(-1, 7)
    dets = dets[dets[:, 0] >= 0]
    threshold = 0.3
    ours = sorted((int(d[1]), float(d[2]), *map(float, d[3:])) for d in dets if d[2] > threshold)
    boxes, scores, classes, count = (arrays["out1/{}".format(i)] for i in range(4))
    n = int(count[0])
    theirs = sorted((int(classes[0, i]), float(scores[0, i]), *map(float, boxes[0, i]))
                    for i in range(n) if scores[0, i] > threshold)
    assert len(theirs) >= 3, theirs  # the test means something only with several detections
    assert [d[0] for d in ours] == [d[0] for d in theirs]
    np.testing.assert_allclose(np.array([d[1:] for d in ours]), np.array([d[1:] for d in theirs]), rtol=1e-4,
                               atol=1e-5)


def test_ssd_points_config_without_its_replacer(tf_graphs, tmp_path):
    config = write_json(tmp_path / "ssd.json", SSD_CONFIG)
    with pytest.raises(Error, match="No replacer implements replacement 'TFObjectDetectionAPIDetectionOutput'"):
        convert_api(input_model=tf_graphs.path("ssd_postprocess"), output=OUTPUTS,
                    tensorflow_use_custom_operations_config=config)


assert HERE
