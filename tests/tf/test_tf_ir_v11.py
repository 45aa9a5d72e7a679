"""TensorFlow models get IR version 11 from the same pipeline (`--ir_version 11`): the
Keras applications and the small graphs made of catalog layers, compiled by the
real OpenVINO runtime (f32), equal TensorFlow within 1e-4 after NCHW -> NHWC."""
import pytest

from tests.tf.tf_helpers import nchw, nhwc, rel_err
from tests.tf.test_tf_ops import CASES

# layers of our own (Const, Pad, Reduce*, StridedSlice, Interpolate) have no IR v11 mapping yet
OWN_LAYERS = {"concat_axes", "eltwise_broadcast_tensors", "eltwise_constants", "l2_normalize", "pad_layers",
              "rank3_per_channel", "reduce_mean_sum", "resize_bilinear", "resize_nearest", "strided_slices"}


@pytest.fixture(scope="module")
def ov_core():
    import openvino
    return openvino.Core()


def run_v11(ov_core, models, case, tmp_path):
    from core.pipeline import ConvertOptions, convert
    from ir.v11 import write_ir_v11
    meta = models.meta(case)
    ctx = convert(ConvertOptions(input_model=models.path(case), batch=None if meta.get("fixed") else 1))
    xml = str(tmp_path / "model.xml")
    write_ir_v11(ctx.network, xml)
    compiled = ov_core.compile_model(ov_core.read_model(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    arrays = models.arrays(case)
    result = compiled({k: nchw(arrays["in1/" + k]) for k in meta["inputs"]})
    outputs = {name: nhwc(result[out]) for out in compiled.outputs for name in out.get_names()}
    for i, tf_name in enumerate(meta["outputs"]):
        name, _, port = tf_name.partition(":")
        key = tf_name if tf_name in outputs else name if name in outputs else \
            next(k for k in outputs if k.startswith(name + "."))
        err = rel_err(outputs[key], arrays["out1/{}".format(i)])
        assert err <= 1e-4, "{} output {}: {:.3g}".format(case, tf_name, err)


@pytest.mark.parametrize("app", ["mobilenet_v2", "resnet50", "inception_v3"])
def test_keras_applications(ov_core, keras_apps, tmp_path, app):
    run_v11(ov_core, keras_apps, app, tmp_path)


@pytest.mark.parametrize("case", [c for c in CASES if c not in OWN_LAYERS])
def test_small_graphs(ov_core, tf_graphs, tmp_path, case):
    run_v11(ov_core, tf_graphs, case, tmp_path)
