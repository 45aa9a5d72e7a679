"""TensorFlow Object Detection API exports (issue 23), real TensorFlow on both sides.

Each model is exported by the OD API's own code (2.8 research package and the 2019
package, tests/tf/odapi/build_exports.py), TensorFlow runs the frozen graph on a
fixed image, and the IR mo-core makes must find the same detections: every
detection above 0.3 on either side paired with one of the other (same class, score
within 1e-3, box within 1e-3 of the image size) - on the CPU daemon (the
reference's command line, with --reverse_input_channels), on the GPU daemon (PoCL)
and, as IR v11, on the OpenVINO runtime (the support JSON chosen from the graph).
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from tests.support import assert_clean_failure, run_cli
from benchmarks.odapi_exports import MODELS, ir_detections, tf_detections, unpaired

SUPPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                       "core", "front", "tf", "object_detection", "support")
# the JSON the reference's documentation names for exports of each code base
REFERENCE_JSON = {("2.8", "ssd"): "ssd_support_api_v1.15.json", ("2019", "ssd"): "ssd_v2_support.json",
                  ("2.8", "faster_rcnn"): "faster_rcnn_support_api_v1.15.json",
                  ("2019", "faster_rcnn"): "faster_rcnn_support_api_v1.13.json"}
# the first test builds the exports of both code bases when the cache lacks them (minutes: see
# benchmarks/odapi_exports.py); later sessions find them cached
pytestmark = pytest.mark.timeout(2700)
CASES = [(codebase, model) for codebase in ("2.8", "2019") for model in sorted(MODELS)]
IDS = ["{}-{}".format(c, m) for c, m in CASES]


def architecture(model: str) -> str:
    return "faster_rcnn" if model.startswith("faster_rcnn") else "ssd"


def nchw(image: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(image.astype(np.float32).transpose(0, 3, 1, 2))


def convert(exports, codebase, model, out_dir, *extra) -> str:
    e = exports[codebase]
    if architecture(model) == "faster_rcnn":  # keep_aspect_ratio_resizer: the image size (the resizer keeps it)
        extra += ("--input_shape", "[1,{},{},3]".format(*MODELS[model]["image"]))
    code, out, err = run_cli("convert", "--input_model", e.graph(model), "--tensorflow_object_detection_api_pipeline_config",
                             e.pipeline(model), "--output_dir", str(out_dir), "--model_name", model, *extra)
    assert code == 0, out + err
    assert "while loop" not in out + err, out + err  # (the replacements take its loops: nothing to warn of)
    return os.path.join(str(out_dir), model + ".xml"), out


def run_ir(ie, xml: str, image: np.ndarray, device: str) -> np.ndarray:
    net = ie.read_network(model=xml)
    assert list(net.inputs) == ["image_tensor"], net.inputs
    exec_net = ie.load_network(net, device)
    try:
        (rows,) = exec_net.infer({"image_tensor": image}).values()
    finally:
        exec_net.close()
    return rows


def assert_same_detections(rows, tf_out):
    ours, theirs = ir_detections(rows), tf_detections(tf_out)
    above = sum(d[1] > 0.3 for d in theirs)
    assert above >= 5, "the fixed image must give several detections above 0.3, TensorFlow gave {}".format(above)
    problems = unpaired(ours, theirs)
    assert not problems, "{} of {} TensorFlow detections above 0.3 unpaired:\n{}".format(
        len(problems), above, "\n".join(problems[:12]))


@pytest.mark.parametrize("codebase,model", CASES, ids=IDS)
def test_reference_command_line_on_the_cpu_daemon(exports, ie, tmp_path, codebase, model):
    """mo-core convert --transformations_config <the reference's JSON> --tensorflow_object_detection_api_pipeline_config
    pipeline.config --reverse_input_channels: one DetectionOutput [1, 1, N, 7]; the IR reads BGR."""
    json_file = os.path.join(SUPPORT, REFERENCE_JSON[codebase, architecture(model)])
    xml, _ = convert(exports, codebase, model, tmp_path, "--transformations_config", json_file,
                     "--reverse_input_channels")
    tf_out = exports[codebase].tf_out(model)
    rows = run_ir(ie, xml, nchw(tf_out["image"][..., ::-1]), "CPU")
    assert rows.shape[:2] == (1, 1) and rows.shape[3] == 7, rows.shape
    assert_same_detections(rows, tf_out)


@pytest.mark.parametrize("codebase,model", CASES, ids=IDS)
def test_json_chosen_from_the_graph_on_the_gpu_daemon(exports, ie, tmp_path, codebase, model):
    xml, out = convert(exports, codebase, model, tmp_path)
    assert "fits the support JSON {}".format(REFERENCE_JSON[codebase, architecture(model)]) in out, out
    tf_out = exports[codebase].tf_out(model)
    assert_same_detections(run_ir(ie, xml, nchw(tf_out["image"]), "GPU"), tf_out)


@pytest.mark.parametrize("codebase,model", CASES, ids=IDS)
def test_ir_v11_on_the_openvino_runtime(exports, tmp_path, codebase, model):
    from tests.ir_v11.v11_helpers import import_openvino
    ov = import_openvino()
    xml, _ = convert(exports, codebase, model, tmp_path, "--ir_version", "11")
    compiled = ov.Core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    tf_out = exports[codebase].tf_out(model)
    (rows,) = compiled.create_infer_request().infer({"image_tensor": nchw(tf_out["image"])}).values()
    assert_same_detections(np.array(rows), tf_out)


TF_SCRIPT = """
import sys, numpy as np, tensorflow as tf
graph_def = tf.compat.v1.GraphDef()
graph_def.ParseFromString(open(sys.argv[1], "rb").read())
with tf.Graph().as_default() as g:
    tf.compat.v1.import_graph_def(graph_def, name="")
names = ["num_detections", "detection_boxes", "detection_scores", "detection_classes"]
with tf.compat.v1.Session(graph=g) as session:
    values = session.run([n + ":0" for n in names], {"image_tensor:0": np.load(sys.argv[2])})
np.savez(sys.argv[3], **dict(zip(names, values)))
"""


def tensorflow_detections(graph: str, image: np.ndarray, work) -> dict:
    """The frozen export run by TensorFlow (in a process of its own: TensorFlow never loads into
    the tests' process) on `image` (uint8 NHWC): its four outputs."""
    np.save(str(work / "image.npy"), image)
    proc = subprocess.run([sys.executable, "-c", TF_SCRIPT, graph, str(work / "image.npy"), str(work / "tf.npz")],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(np.load(str(work / "tf.npz")))


def test_boxes_left_empty_by_the_clip_are_dropped(exports, ie, tmp_path):
    """The OD API's NMS drops a detection whose box, clipped to the image, has no area (OpenVINO's
    DetectionOutput keeps it): at 64x96 (the fixed image reflected on the right) the 2.8
    faster_rcnn_resnet50 export gives such boxes with high scores. Ours drop them in both stages:
    the same detections as TensorFlow - all of them, not only those above 0.3 - on the CPU daemon
    and as IR v11 on OpenVINO; the same IR keeping them (drop_empty_boxes 0) does not pair."""
    from tests.ir_v11.v11_helpers import import_openvino
    e, model = exports["2.8"], "faster_rcnn_resnet50"
    image = np.pad(e.tf_out(model)["image"], ((0, 0), (0, 0), (0, 16), (0, 0)), mode="reflect")
    tf_out = tensorflow_detections(e.graph(model), image, tmp_path)
    theirs = tf_detections(tf_out)
    xmls = {}
    for version in ("2", "11"):
        code, out, err = run_cli("convert", "--input_model", e.graph(model),
                                 "--tensorflow_object_detection_api_pipeline_config", e.pipeline(model),
                                 "--input_shape", "[1,64,96,3]", "--output_dir", str(tmp_path / version),
                                 "--model_name", model, "--ir_version", version)
        assert code == 0, out + err
        xmls[version] = str(tmp_path / version / (model + ".xml"))
    ours = ir_detections(run_ir(ie, xmls["2"], nchw(image), "CPU"))
    assert len(ours) == len(theirs) and not unpaired(ours, theirs), unpaired(ours, theirs)
    compiled = import_openvino().Core().compile_model(xmls["11"], "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    (rows,) = compiled.create_infer_request().infer({"image_tensor": nchw(image)}).values()
    v11 = ir_detections(np.array(rows))
    assert len(v11) == len(theirs) and not unpaired(v11, theirs), unpaired(v11, theirs)
    with open(xmls["2"]) as f:
        text = f.read()
    assert text.count('drop_empty_boxes="1"') == 2, "both stages' DetectionOutput drop empty boxes"
    kept = str(tmp_path / "2" / "kept.xml")
    with open(kept, "w") as f:
        f.write(text.replace('drop_empty_boxes="1"', 'drop_empty_boxes="0"'))
    os.link(xmls["2"][:-4] + ".bin", kept[:-4] + ".bin")
    empty = [d for d in ir_detections(run_ir(ie, kept, nchw(image), "CPU"))
             if d[1] > 0.3 and (d[4] - d[2]) * (d[5] - d[3]) <= 0]
    assert len(empty) >= 3, "the image must give empty boxes above 0.3 when they are kept"


# --- errors: one [ ERROR ] naming what was expected, exit 1, no files ------------------------------
def _cli_failure(exports, tmp_path, *args):
    e = exports["2.8"]
    out_dir = tmp_path / "out"
    code, out, err = run_cli("convert", "--input_model", e.graph("ssd_mobilenet_v2"), "--output_dir", str(out_dir),
                             *args)
    return code, out, err, str(out_dir)


def test_wrong_json_version(exports, tmp_path):
    code, out, err, out_dir = _cli_failure(
        exports, tmp_path, "--transformations_config", os.path.join(SUPPORT, "ssd_v2_support.json"),
        "--tensorflow_object_detection_api_pipeline_config", exports["2.8"].pipeline("ssd_mobilenet_v2"))
    assert_clean_failure(code, out, err, out_dir, "ssd_v2_support.json", "'Postprocessor/ToFloat'",
                         "fits ssd_support_api_v1.15.json")


def test_missing_pipeline_config(exports, tmp_path):
    code, out, err, out_dir = _cli_failure(
        exports, tmp_path, "--transformations_config", os.path.join(SUPPORT, "ssd_support_api_v1.15.json"))
    assert_clean_failure(code, out, err, out_dir, "needs its pipeline.config",
                         "--tensorflow_object_detection_api_pipeline_config")


def test_pipeline_config_of_another_meta_architecture(exports, tmp_path):
    config = tmp_path / "pipeline.config"
    config.write_text("model { faster_rcnn { num_classes: 4 image_resizer { keep_aspect_ratio_resizer { "
                      "min_dimension: 64 max_dimension: 96 } } } }\n")
    code, out, err, out_dir = _cli_failure(
        exports, tmp_path, "--transformations_config", os.path.join(SUPPORT, "ssd_support_api_v1.15.json"),
        "--tensorflow_object_detection_api_pipeline_config", str(config))
    assert_clean_failure(code, out, err, out_dir, "describes a 'faster_rcnn' model", "converts 'ssd' models")


def test_pipeline_config_that_is_not_text(exports, tmp_path):
    config = tmp_path / "pipeline.config"
    config.write_bytes(b"model { ssd { num_classes: 4 \x00\x01 } }")
    code, out, err, out_dir = _cli_failure(exports, tmp_path, "--tensorflow_object_detection_api_pipeline_config",
                                           str(config))
    assert_clean_failure(code, out, err, out_dir, "pipeline.config", "line 1")


@pytest.mark.parametrize("shape, needle", [("[1,3,64,80]", "looks like NCHW"), ("[2,64,80,3]", "one image"),
                                           ("[1,64,80,1]", "3 channels")])
def test_an_input_shape_that_is_not_one_nhwc_image(exports, tmp_path, shape, needle):
    """keep_aspect_ratio models take the image size from --input_shape: batch 2, one channel
    or an NCHW shape were converted silently into an IR that computed nonsense."""
    e = exports["2.8"]
    out_dir = tmp_path / "out"
    code, out, err = run_cli("convert", "--input_model", e.graph("faster_rcnn_inception_v2"), "--output_dir",
                             str(out_dir), "--tensorflow_object_detection_api_pipeline_config",
                             e.pipeline("faster_rcnn_inception_v2"), "--input_shape", shape)
    assert_clean_failure(code, out, err, str(out_dir), "must be one NHWC shape [1,HEIGHT,WIDTH,3]", needle)


def test_an_input_shape_on_a_fixed_shape_model_is_ignored_with_a_warning(exports, tmp_path):
    """fixed_shape_resizer: the IR's input is the resizer's size whatever --input_shape says
    (as the reference): said, not silent."""
    e = exports["2.8"]
    code, out, err = run_cli("convert", "--input_model", e.graph("ssd_mobilenet_v2"), "--output_dir",
                             str(tmp_path / "out"), "--tensorflow_object_detection_api_pipeline_config",
                             e.pipeline("ssd_mobilenet_v2"), "--input_shape", "[1,480,640,3]")
    assert code == 0, out + err
    assert "[ WARNING ]" in out + err and "--input_shape [1, 480, 640, 3] is ignored" in out + err, out + err
