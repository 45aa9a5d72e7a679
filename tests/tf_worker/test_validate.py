"""`mo-core convert --validate`: the written IR on the CPU daemon against the model's
own framework (pycaffe in the Caffe worker, TensorFlow in the TF worker) on the
same input, per output; --validate_layers names the first layer that diverges.
An IR whose .bin a test perturbs fails, naming the perturbed layer."""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from core.errors import Error
from core.pipeline import ConvertOptions, convert
from ir import write_ir
from tests.support import assert_clean_failure, make_caffemodel, run_cli
from tests.tf import conftest as tf_fixtures

HERE = os.path.dirname(os.path.abspath(__file__))
CAFFE_NET = os.path.join(HERE, "caffe_data", "validate_net.prototxt")
BN_NET = os.path.join(os.path.dirname(HERE), "convert", "nets", "conv_bn_scale.prototxt")
tf_graphs = tf_fixtures.tf_graphs


@pytest.fixture(scope="module")
def caffe_model(tmp_path_factory):
    weights = str(tmp_path_factory.mktemp("validate") / "validate_net.caffemodel")
    make_caffemodel(CAFFE_NET, weights, scale=0.3)
    return weights


def validate_cli(tmp_path, *args):
    return run_cli("convert", "--output_dir", str(tmp_path / "out"), "--silent", *args, timeout=900)


def converted(tmp_path, **options):
    """(context, .xml, .bin) of a conversion with --validate, written like the CLI does."""
    ctx = convert(ConvertOptions(output_dir=str(tmp_path), validate=True, **options))
    xml, bin_path = str(tmp_path / (ctx.network.name + ".xml")), str(tmp_path / (ctx.network.name + ".bin"))
    write_ir(ctx.network, xml, bin_path)
    return ctx, xml, bin_path


def perturb(xml: str, bin_path: str, layer: str, blob: str = "weights"):
    """Adds 0.5 to the first values of a layer's blob in the .bin."""
    element = next(e for e in ET.parse(xml).getroot().iter("layer") if e.get("name") == layer)
    where = next(b for b in element.iter(blob))
    values = np.memmap(bin_path, dtype=np.float32, mode="r+", offset=int(where.get("offset")),
                       shape=(int(where.get("size")) // 4,))
    values[:8] += 0.5
    values.flush()


def test_caffe_model_validates(ie, caffe_model, tmp_path):
    code, out, err = validate_cli(tmp_path, "--input_model", caffe_model, "--input_proto", CAFFE_NET,
                                  "--validate_layers")
    assert code == 0, err
    assert "vs Caffe on seeded standard normal noise (seed 0) (tolerance 0.0001 relative)" in out
    assert "output 'prob' vs Caffe 'prob:0'" in out and "OK" in out
    assert "no layer diverges" in out
    compared = int(out.split(" intermediate tensors compared")[0].rsplit(" ", 1)[1])
    assert compared >= 6  # conv1 before its in-place ReLU, relu1, pool1, conv2, relu2, fc


def test_a_fused_caffe_model_validates(ie, tmp_path):
    weights = str(tmp_path / "bn.caffemodel")
    make_caffemodel(BN_NET, weights, positive=("conv1_bn", "conv1_scale", "fc_bn"))
    code, out, err = validate_cli(tmp_path, "--input_model", weights, "--input_proto", BN_NET, "--validate_layers")
    assert code == 0, err
    assert "no layer diverges" in out


def test_a_perturbed_caffe_weight_is_named(ie, caffe_model, tmp_path):
    from cli.validation import plan_checked, validate_written_ir
    ctx, xml, bin_path = converted(tmp_path, input_model=caffe_model, input_proto=CAFFE_NET, validate_layers=True)
    perturb(xml, bin_path, "conv2")
    with pytest.raises(Error) as info:
        validate_written_ir(ctx, plan_checked(ctx), xml, bin_path)
    text = str(info.value)
    # the saturated softmax output hides it; the layer comparison does not
    assert "Validation failed" in text and "tensor 'conv2'" in text and "The first layer that diverges is 'conv2'" in text


def test_tf_model_with_an_offloaded_sub_graph_validates(ie, offload_graphs, tmp_path):
    code, out, err = validate_cli(tmp_path, "--input_model", offload_graphs.path("composite_head"), "-b", "1",
                                  "--tensorflow_subgraph_patterns", "head/.*", "--validate_layers")
    assert code == 0, err
    assert "vs TensorFlow" in out and "output 'MaxPool2d' vs TensorFlow 'MaxPool2d:0'" in out
    assert "no layer diverges" in out


def test_a_perturbed_tf_weight_is_named_and_fails_the_cli(ie, offload_graphs, tmp_path):
    from cli.validation import plan_checked, validate_written_ir
    ctx, xml, bin_path = converted(tmp_path, input_model=offload_graphs.path("composite_head"), batch=1,
                                   tensorflow_subgraph_patterns="head/.*", validate_layers=True)
    perturb(xml, bin_path, "stem/Conv2D")
    with pytest.raises(Error) as info:
        validate_written_ir(ctx, plan_checked(ctx), xml, bin_path)
    assert "The first layer that diverges is 'stem/Conv2D' (Convolution)" in str(info.value)
    # without --validate_layers the message says how to find the layer
    ctx.options.validate_layers = False
    with pytest.raises(Error, match="--validate_layers names the first layer that diverges"):
        validate_written_ir(ctx, plan_checked(ctx), xml, bin_path)


def test_keras_resnet50_validates(ie, keras_apps, tmp_path):
    code, out, err = validate_cli(tmp_path, "--input_model", keras_apps.path("resnet50"), "-b", "1", "--validate")
    assert code == 0, err
    assert out.count(" OK") == 1


def test_validate_input_preprocessing_and_tolerance(ie, tf_graphs, tmp_path):
    """The framework gets the input the IR's preprocessing makes of it; a tolerance too small fails."""
    model = tf_graphs.path("preprocess_into_conv")
    raw = np.random.default_rng(3).uniform(0, 255, (1, 8, 8, 3)).astype(np.float32)
    np.save(tmp_path / "raw.npy", raw)
    args = ["--input_model", model, "-b", "1", "--mean_values", "[120,110,100]", "--scale_values", "[60,50,40]",
            "--reverse_input_channels", "--validate_input", str(tmp_path / "raw.npy")]
    code, out, err = validate_cli(tmp_path, *args)
    assert code == 0, err
    assert "on {}".format(tmp_path / "raw.npy") in out
    code, out, err = validate_cli(tmp_path / "tight", *args, "--validate_tolerance", "1e-12")
    assert code == 1 and "Validation failed" in err and "Traceback" not in err
    assert os.path.isfile(tmp_path / "tight" / "out" / "preprocess_into_conv.xml")  # the IR that was checked stays


def test_fp16_default_tolerance(ie, offload_graphs, tmp_path):
    code, out, err = validate_cli(tmp_path, "--input_model", offload_graphs.path("conv_weights"), "-b", "1",
                                  "--data_type", "FP16", "--validate")
    assert code == 0, err
    assert "(tolerance 0.01 relative)" in out


@pytest.mark.parametrize("args, needles", [
    (["--ir_version", "11"], ["--validate runs the IR on the CPU daemon", "IR version 2"]),
    (["--validate_tolerance", "0"], ["--validate_tolerance must be a positive"]),
])
def test_validate_option_mistakes(offload_graphs, tmp_path, args, needles):
    code, out, err = validate_cli(tmp_path, "--input_model", offload_graphs.path("conv_weights"), "-b", "1",
                                  "--validate", *args)
    assert_clean_failure(code, out, err, tmp_path / "out", *needles)


def test_validate_input_of_the_wrong_shape(ie, offload_graphs, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 9, 9), np.float32))  # NCHW: the framework's layout is NHWC
    code, out, err = validate_cli(tmp_path, "--input_model", offload_graphs.path("conv_weights"), "-b", "1",
                                  "--validate_input", str(tmp_path / "x.npy"))
    # checked before the IR is written: nothing is left behind
    assert_clean_failure(code, out, err, tmp_path / "out", "the array for input 'x' has the shape [1, 3, 9, 9]",
                         "[1, 9, 9, 3]")
