"""CustomLayersMapping.xml in the form of the reference's own shipped example: root
<CustomKernelsMapping>, spaces around '='. Its <CustomLayer> children are read
whatever the root is called; other children are skipped with a warning."""
import os

import numpy as np

from device_daemons.cpu import ExecutionPlan
from core.services.caffe_worker import DEFINITION_ATTR
from ir import read_ir, write_ir
from tests.caffe_models import make_caffemodel
from tests.numpy_reference import conv2d
from tests.support import convert_api, run_cli, write_text

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS_MAPPING = os.path.join(HERE, "reference_kernels_mapping.xml")  # the reference example's form
NET = """name: "leaky"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 2 dim: 6 dim: 6 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 3 kernel_size: 3 } }
layer { name: "leaky" type: "ReLU" bottom: "conv" top: "leaky" relu_param { negative_slope: 0.1 } }
"""


def model(tmp_path):
    proto = write_text(str(tmp_path / "leaky.prototxt"), NET)
    weights = str(tmp_path / "leaky.caffemodel")
    return proto, weights, make_caffemodel(proto, weights, scale=0.5)


def test_the_reference_examples_form_maps_relu_and_the_ir_runs(tmp_path):
    proto, weights, blobs = model(tmp_path)
    net = convert_api(input_model=weights, input_proto=proto, custom_layers_mapping=KERNELS_MAPPING)
    leaky = net.layer_by_name("leaky")
    # mapped: the Caffe type and every relu_param field, as they are
    assert leaky.type == "ReLU"
    assert leaky.data.pop(DEFINITION_ATTR).startswith('layer { name: "leaky" type: "ReLU"')  # its own definition
    assert leaky.data == {"negative_slope": "0.1", "engine": "caffe.ReLUParameter.DEFAULT"}
    write_ir(net, str(tmp_path / "leaky.xml"))
    x = np.random.default_rng(1).standard_normal((1, 2, 6, 6)).astype(np.float32)
    got = ExecutionPlan(read_ir(str(tmp_path / "leaky.xml"))).infer({"data": x})["leaky"]
    conv = conv2d(x, *blobs["conv"])
    np.testing.assert_allclose(got, np.where(conv > 0, conv, 0.1 * conv), rtol=1e-5, atol=1e-5)


def test_other_children_are_skipped_with_a_warning(tmp_path):
    proto, weights, _ = model(tmp_path)
    mapping = write_text(str(tmp_path / "m.xml"), open(KERNELS_MAPPING).read().replace(
        "</CustomKernelsMapping>", '  <Comment text="mapped for the fallback"/>\n</CustomKernelsMapping>'))
    code, out, err = run_cli("convert", "--input_model", weights, "--input_proto", proto, "-k", mapping,
                             "--output_dir", str(tmp_path / "out"))
    assert code == 0, err
    assert "[ WARNING ]  Unexpected element in {} entry 2 (<Comment>): only <CustomLayer .../> entries are read; " \
           "it is skipped.".format(mapping) in out
