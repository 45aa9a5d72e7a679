"""Bad inputs give one screen of `[ ERROR ]`, exit status 1, no traceback and no
output files; an earlier good IR at the same path is left untouched."""
import os
import shutil

import pytest

from tests.caffe_models import make_caffemodel
from tests.support import assert_clean_failure, run_cli, write_text

NET = os.path.join(os.path.dirname(__file__), "nets", "conv_bn_scale.prototxt")
OTHER_NET = os.path.join(os.path.dirname(__file__), "nets", "ssd_small.prototxt")


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    d = tmp_path_factory.mktemp("good")
    weights = str(d / "m.caffemodel")
    make_caffemodel(NET, weights, positive=("conv1_bn", "conv1_scale", "fc_bn"))
    return weights


def convert(outdir, *args):
    return run_cli("convert", "--output_dir", str(outdir), "--model_name", "m", *args)


def test_missing_file(tmp_path, good):
    res = convert(tmp_path / "out", "--input_model", str(tmp_path / "nope.caffemodel"), "--input_proto", NET)
    assert_clean_failure(*res, tmp_path / "out", "nope.caffemodel", "does not exist")
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", str(tmp_path / "nope.prototxt"))
    assert_clean_failure(*res, tmp_path / "out", "nope.prototxt", "#20")


def test_truncated_caffemodel(tmp_path, own_models):
    proto, weights = own_models["bvlc_googlenet"]
    cut = tmp_path / "cut.caffemodel"
    with open(weights, "rb") as f:
        cut.write_bytes(f.read()[: os.path.getsize(weights) // 2])
    res = convert(tmp_path / "out", "--input_model", str(cut), "--input_proto", proto)
    assert_clean_failure(*res, tmp_path / "out", "cut.caffemodel", "truncated")


def test_prototxt_syntax_error(tmp_path, good):
    bad = write_text(str(tmp_path / "bad.prototxt"), open(NET).read().replace("top: \"conv1\"\n", "top: \"conv1\n", 1))
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", bad)
    assert_clean_failure(*res, tmp_path / "out", "bad.prototxt", "line ", "#11")


def test_unknown_field(tmp_path, good):
    bad = write_text(str(tmp_path / "field.prototxt"),
                     open(NET).read().replace("kernel_size: 3", "kernel_size: 3 fancy_option: 7"))
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", bad)
    assert_clean_failure(*res, tmp_path / "out", '"fancy_option"', "field.prototxt", "line 4", "mo_caffe.proto", "#1")


def test_unknown_layer_type(tmp_path, good):
    bad = write_text(str(tmp_path / "custom.prototxt"), open(NET).read().replace(
        'type: "ReLU"', 'type: "MyMagicActivation"'))
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", bad)
    assert_clean_failure(*res, tmp_path / "out", "conv1_relu", "MyMagicActivation", "CustomLayersMapping.xml",
                         "--extensions", "#44")


def test_every_unsupported_layer_is_reported_at_once(tmp_path, good):
    text = open(NET).read()
    text = text.replace('type: "ReLU"', 'type: "MyMagicActivation"')
    text = text.replace('type: "BatchNorm" bottom: "fc"', 'type: "MyMagicActivation" bottom: "fc"')
    text = text.replace('type: "Scale"', 'type: "Python" python_param { module: "rpn.layers" layer: "Glue" }')
    text += 'layer { name: "tail" type: "FancyNorm" bottom: "fc_bn" top: "tail" }\n'
    bad = write_text(str(tmp_path / "custom.prototxt"), text)
    code, out, err = convert(tmp_path / "out", "--input_model", good, "--input_proto", bad)
    assert_clean_failure(code, out, err, tmp_path / "out", "CustomLayersMapping.xml", "--extensions", "#44")
    assert "does not support 4 layers of 3 types in this model" in err
    assert '  MyMagicActivation (2 layers): "conv1_relu", "fc_bn"' in err
    assert '  FancyNorm (1 layer): "tail"' in err
    assert '  Python (rpn.layers.Glue) (1 layer): "conv1_scale"' in err


@pytest.mark.parametrize("shape", ["[1,3,x,10]", "1,3,10,10", "[1,3,-1,10]", "[1,3,10,10"])
def test_bad_input_shape(tmp_path, good, shape):
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--input_shape", shape)
    assert_clean_failure(*res, tmp_path / "out", "cannot be parsed", "#56")


def test_output_naming_no_node(tmp_path, good):
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--output", "conv_42")
    assert_clean_failure(*res, tmp_path / "out", "conv_42", "does not exist", "#25")


def test_shapes_that_do_not_agree(tmp_path, good):
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--input_shape", "[1,4,10,10]")
    assert_clean_failure(*res, tmp_path / "out", "conv1", "[1, 4, 10, 10]", "--input_shape")


def test_weights_of_another_model(tmp_path):
    other = str(tmp_path / "other.caffemodel")
    make_caffemodel(OTHER_NET, other)
    res = convert(tmp_path / "out", "--input_model", other, "--input_proto", NET)
    assert_clean_failure(*res, tmp_path / "out", "weight blob")


def test_bad_options(tmp_path, good):
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "-b", "2", "--input_shape",
                  "[1,3,10,10]")
    assert_clean_failure(*res, tmp_path / "out", "#55")
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--mean_values", "(1,2)")
    assert_clean_failure(*res, tmp_path / "out", "#59")
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--mean_values", "(a,b,c)")
    assert_clean_failure(*res, tmp_path / "out", "#58")
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--scale", "2",
                  "--scale_values", "(1,2,3)")
    assert_clean_failure(*res, tmp_path / "out", "#19")
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--mean_values",
                  "data[1,2,3],data[4,5,6]")
    assert_clean_failure(*res, tmp_path / "out", "values for data more than once")
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--scale", "inf")
    assert_clean_failure(*res, tmp_path / "out", "not a finite number", "#97")
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--freeze_placeholder_with_value",
                  "data->1")
    assert_clean_failure(*res, tmp_path / "out", "a Caffe model's inputs cannot be frozen")
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--model_name", "../elsewhere")
    assert_clean_failure(*res, tmp_path / "out", "must be a file name")
    assert not (tmp_path / "elsewhere.xml").exists()
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--extensions", NET)
    assert_clean_failure(*res, tmp_path / "out", "is not a Python file")
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, "--extensions",
                  str(tmp_path / "nowhere"))
    assert_clean_failure(*res, tmp_path / "out", "does not exist")
    res = run_cli("convert", "--bogus")
    assert res[0] == 1 and "[ ERROR ]" in res[2] and "Traceback" not in res[2]


@pytest.mark.parametrize("option, needles", [
    (["--layout", "NCHW"], ["--layout is an option of OpenVINO's mo that mo-core does not have", "NCHW"]),
    (["--progress"], ["--progress is an option of OpenVINO's mo", "--log_level DEBUG"]),
    (["--use_legacy_frontend"], ["one front end"]),
    (["--reverse_input_channels=maybe"], ["--reverse_input_channels", "'maybe'"]),
])
def test_mos_own_options_say_what_to_do(tmp_path, good, option, needles):
    res = convert(tmp_path / "out", "--input_model", good, "--input_proto", NET, *option)
    assert_clean_failure(*res, tmp_path / "out", *needles)


def test_mos_spellings_of_switches_and_fp16(tmp_path, good):
    """Switches with values (--reverse_input_channels=False), --compress_to_fp16, --static_shape, --k,
    --version: mo's command lines run as they are."""
    from ir import read_ir
    code, _, err = convert(tmp_path / "a", "--input_model", good, "--input_proto", NET, "--compress_to_fp16",
                           "--reverse_input_channels=False", "--static_shape", "--silent=True", "--disable_fusing=0")
    assert code == 0, err
    net = read_ir(str(tmp_path / "a" / "m.xml"))
    assert {layer.precision for layer in net.layers} == {"FP16"}
    assert "cli_reverse_input_channels" not in net.meta and "ScaleShift" not in [l.type for l in net.layers]
    code, out, err = convert(tmp_path / "b", "--input_model", good, "--input_proto", NET, "--compress_to_fp16=False",
                             "--k", str(tmp_path / "none.xml"))
    assert code == 1 and "none.xml' (-k) does not exist" in err, err
    code, out, _ = run_cli("convert", "--version")
    assert code == 0 and out.strip() == "mo-core 0.1.0"


def test_failure_leaves_an_earlier_ir_untouched(tmp_path, good):
    out = tmp_path / "out"
    code, _, err = convert(out, "--input_model", good, "--input_proto", NET)
    assert code == 0, err
    before = {f: (out / f).read_bytes() for f in ("m.xml", "m.bin")}
    for f in before:
        shutil.copy(out / f, out / ("earlier_" + f))
    code, _, err = convert(out, "--input_model", good, "--input_proto", NET, "--input_shape", "[1,4,10,10]")
    assert code == 1 and "Traceback" not in err
    assert {f: (out / f).read_bytes() for f in before} == before
    assert sorted(os.listdir(out)) == sorted(list(before) + ["earlier_m.xml", "earlier_m.bin"])
