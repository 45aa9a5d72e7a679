"""The pipeline.config reader (core/front/tf/object_detection/pipeline_config.py): protobuf
text format with limits; the values the replacers use, with the OD API's defaults."""
from __future__ import annotations

import pytest

from core.errors import Error
from core.front.tf.object_detection.pipeline_config import MAX_DEPTH, PipelineConfig, parse_text, read_pipeline_config
from core.front.tf.object_detection.preprocessor import resized_size

SSD = """
# comment
model {
  ssd {
    num_classes: 90
    box_coder { faster_rcnn_box_coder { y_scale: 10.0 x_scale: 10.0 height_scale: 5.0 width_scale: 5.0 } }
    image_resizer { fixed_shape_resizer { height: 300 width: 300 } }
    anchor_generator { ssd_anchor_generator { num_layers: 6 aspect_ratios: [1.0, 2.0] aspect_ratios: 0.5 } }
    post_processing {
      batch_non_max_suppression { score_threshold: 1e-8 iou_threshold: 0.6 max_detections_per_class: 100
                                  max_total_detections: 100 }
      score_converter: SIGMOID
    }
  }
}
train_config: { batch_size: 24 fine_tune_checkpoint: "PATH/model.ckpt" }
"""


def test_ssd_values():
    c = PipelineConfig(parse_text(SSD), "p")
    assert c.meta_architecture == "ssd" and c.num_classes() == 90
    assert c.resizer() == {"kind": "fixed_shape", "height": 300, "width": 300}
    assert c.box_coder_variances() == [0.1, 0.1, 0.2, 0.2]
    assert c.nms()["score_converter"] == "SIGMOID" and c.nms()["iou_threshold"] == 0.6
    assert c.get_all("anchor_generator.ssd_anchor_generator.aspect_ratios") == [1.0, 2.0, 0.5]


def test_keep_aspect_ratio_sizes():
    c = PipelineConfig(parse_text("model { faster_rcnn { image_resizer { keep_aspect_ratio_resizer { "
                                  "min_dimension: 600 max_dimension: 1024 } } } }"), "p")
    assert resized_size(c, [1, 480, 640, 3]) == (600, 800)     # the short side to 600
    assert resized_size(c, [1, 300, 1000, 3]) == (307, 1024)   # the long side capped at 1024
    with pytest.raises(Error, match="--input_shape"):
        resized_size(c, None)


@pytest.mark.parametrize("text,needle", [
    ("model { ssd { num_classes: 4 }", "'}' is missing"),
    ("model { ssd { num_classes 4 } }", "needs ':'"),
    ("model { ssd { num_classes: @ } }", "unexpected character"),
    ("a {" * (MAX_DEPTH + 2) + "}" * (MAX_DEPTH + 2), "nested deeper"),
])
def test_malformed_text(text, needle):
    with pytest.raises(Error, match=needle):
        parse_text(text, "p")


def test_file_limits(tmp_path):
    big = tmp_path / "big.config"
    big.write_bytes(b"#" * ((1 << 20) + 1))
    with pytest.raises(Error, match="a few KB"):
        read_pipeline_config(str(big))
    with pytest.raises(Error, match="does not exist"):
        read_pipeline_config(str(tmp_path / "missing.config"))
    other = tmp_path / "other.config"
    other.write_text("train_config { batch_size: 1 }")
    with pytest.raises(Error, match="no 'model"):
        read_pipeline_config(str(other))
