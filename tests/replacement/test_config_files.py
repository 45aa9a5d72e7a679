"""Replacement configuration files on Caffe nets the tests build (the machinery is
framework-neutral: node names, ops, edges): scope with several instances replaced
by one op (custom_attributes into the IR, the op's CPU kernel on the daemon, equal
to pycaffe), the --tensorflow_custom_operations_config_update round trip, points
(the guide's four steps) with a Python replacer, general, and every malformed file
or failed match as a clear [ ERROR ] with the reference FAQ number."""
import json
import os
import re

import numpy as np
import pytest

from core.errors import Error
from tests.replacement.caffe_nets import HSWISH_BLOCKS, MVN_DECOMPOSED, MVN_LAYER
from tests.replacement.conftest import EXT, HERE
from tests.replacement.test_caffe_examples import run_ir
from tests.support import (assert_clean_failure, caffe_outputs, compare_with_caffe, convert_api, make_caffemodel,
                           run_cli, write_text)

HSWISH_EXT = os.path.join(EXT, "hswish_block")
MVN_POINTS_EXT = os.path.join(EXT, "mvn_points")
HSWISH_KERNEL = os.path.join(HERE, "data", "hswish_block_kernel.py")

SCOPE_TEMPLATE = [{
    "id": "HSwishBlockReplacer",
    "op": "HSwishBlock",
    "match_kind": "scope",
    "instances": ["act1", "act2", "act3"],
    "custom_attributes": {"shift": 3.0, "max": 6.0},
}]


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    d = tmp_path_factory.mktemp("hswish_blocks")
    proto = write_text(str(d / "blocks.prototxt"), HSWISH_BLOCKS)
    weights = str(d / "blocks.caffemodel")
    make_caffemodel(proto, weights, seed=5, scale=0.4)
    return proto, weights


@pytest.fixture(scope="module")
def mvn(tmp_path_factory):
    d = tmp_path_factory.mktemp("mvn_points")
    proto = write_text(str(d / "mvn.prototxt"), MVN_DECOMPOSED)
    reference = write_text(str(d / "mvn_layer.prototxt"), MVN_LAYER)
    weights = str(d / "mvn.caffemodel")
    make_caffemodel(proto, weights, seed=6, scale=0.3)
    return proto, weights, reference


def write_json(path, data) -> str:
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
    return str(path)


def network_text(network) -> str:
    """The IR .xml of a network without its <meta_data> (which names the config file)."""
    from ir import to_xml_string
    return re.sub(r"<meta_data>.*</meta_data>", "", to_xml_string(network), flags=re.S)


# --- scope --------------------------------------------------------------------------
def test_scope_instances_become_one_layer_each_equal_to_pycaffe(ie, blocks, tmp_path):
    proto, weights = blocks
    config = write_json(tmp_path / "blocks.json", SCOPE_TEMPLATE)
    network = convert_api(input_model=weights, input_proto=proto, extensions=HSWISH_EXT,
                          tensorflow_use_custom_operations_config=config)
    layers = {layer.name: layer for layer in network.layers}
    assert sorted(n for n, l in layers.items() if l.type == "HSwishBlock") == ["act1", "act2", "act3"]
    assert not [n for n in layers if "/" in n], list(layers)  # every block node went
    assert layers["act2"].data == {"shift": "3", "max": "6"}
    ie.add_extension(HSWISH_KERNEL, "CPU")
    inputs = {"data": np.random.default_rng(2).standard_normal((2, 3, 10, 10)).astype(np.float32) * 2}
    ours = run_ir(ie, network, tmp_path, inputs)
    compare_with_caffe(ours, caffe_outputs(proto, weights, inputs), 1e-4)


def test_update_round_trip_fills_inputs_and_outputs_and_gives_the_same_ir(blocks, tmp_path):
    proto, weights = blocks
    template = write_json(tmp_path / "template.json", SCOPE_TEMPLATE)
    updated = write_json(tmp_path / "updated.json", SCOPE_TEMPLATE)
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("convert", "--input_model", weights, "--input_proto", proto, "--output_dir",
                                   str(out), "--tensorflow_custom_operations_config_update", updated)
    assert code == 0, stderr
    assert "[ SUCCESS ] Updated the custom replacements configuration file" in stdout
    assert not out.exists() or os.listdir(out) == []  # the update mode writes no IR
    with open(updated) as f:
        text = f.read()
    data = json.loads(text)
    assert data == [dict(SCOPE_TEMPLATE[0],
                         inputs=[[{"node": "mul$", "port": 0}, {"node": "shift$", "port": 0}]],
                         outputs=[{"node": "mul$", "port": 0}])]
    assert text.startswith("[\n    {\n        \"custom_attributes\"")  # sorted keys, 4 spaces: the guide's layout
    assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []  # no temporary file left
    # converting with the updated file gives the IR that the template gives (inputs computed on the fly)
    nets = [convert_api(input_model=weights, input_proto=proto, extensions=HSWISH_EXT,
                        tensorflow_use_custom_operations_config=path) for path in (template, updated)]
    assert network_text(nets[0]) == network_text(nets[1])
    # a second update leaves a complete file as it is
    code, _, stderr = run_cli("convert", "--input_model", weights, "--input_proto", proto,
                              "--tensorflow_custom_operations_config_update", updated)
    assert code == 0, stderr
    with open(updated) as f:
        assert f.read() == text


def test_custom_python_replacer_with_single_input_node_on_a_shared_tensor_is_faq_32(blocks, tmp_path):
    proto, weights = blocks
    ext = tmp_path / "ext" / "front" / "caffe"
    ext.mkdir(parents=True)
    write_text(str(ext / "blocks.py"), (
        "from core.front.replacement import FrontReplacementFromConfigFileSubGraph\n\n\n"
        "class Blocks(FrontReplacementFromConfigFileSubGraph):\n"
        "    replacement_id = 'HSwishBlockReplacer'\n\n"
        "    def generate_sub_graph(self, graph, match):\n"
        "        match.single_input_node(0)\n"
        "        return {}\n"))
    config = write_json(tmp_path / "blocks.json", SCOPE_TEMPLATE)
    with pytest.raises(Error) as info:
        convert_api(input_model=weights, input_proto=proto, extensions="{},{}".format(HSWISH_EXT, tmp_path / "ext"),
                    tensorflow_use_custom_operations_config=config)
    text = str(info.value)
    assert info.value.faq == 32
    assert "The amount of input nodes for port 0 is not equal to 1" in text
    assert '"HSwishBlockReplacer" (Blocks in {}, line 8)'.format(ext / "blocks.py") in text


# --- points -------------------------------------------------------------------------
POINTS = {"id": "MVNByPoints", "match_kind": "points",
          "instances": {"start_points": ["mean", "centered"], "end_points": ["normalized"]},
          "include_inputs_to_sub_graph": True, "include_outputs_to_sub_graph": True,
          "custom_attributes": {"eps": 1e-9, "across_channels": False, "normalize_variance": True}}


def test_points_replacement_by_a_python_replacer_equals_pycaffe_mvn(ie, mvn, tmp_path):
    proto, weights, reference = mvn
    config = write_json(tmp_path / "points.json", [POINTS])
    network = convert_api(input_model=weights, input_proto=proto, extensions=MVN_POINTS_EXT,
                          tensorflow_use_custom_operations_config=config)
    assert [layer.type for layer in network.layers] == ["Input", "Convolution", "MVN", "Convolution"]
    inputs = {"data": np.random.default_rng(3).standard_normal((2, 3, 10, 10)).astype(np.float32)}
    ours = run_ir(ie, network, tmp_path, inputs)
    compare_with_caffe(ours, caffe_outputs(reference, weights, inputs), 1e-4)


def test_points_replacement_by_op_writes_the_custom_attributes(mvn, tmp_path):
    """A points description with an `op` and no replacer class of its id: one node of
    the op, whose custom_attributes reach the IR's <data> after the op's own attributes
    (HSwishBlock declares shift and max; eps and mode are the description's only)."""
    proto, weights, _ = mvn
    desc = dict(POINTS, id="MVNPointsAsOp", op="HSwishBlock",
                custom_attributes={"shift": 1.5, "max": 2.0, "eps": 1e-9, "mode": "across"})
    config = write_json(tmp_path / "points_op.json", [desc])
    network = convert_api(input_model=weights, input_proto=proto, extensions=HSWISH_EXT,
                          tensorflow_use_custom_operations_config=config)
    (block,) = [layer for layer in network.layers if layer.type == "HSwishBlock"]
    assert block.data == {"shift": "1.5", "max": "2", "eps": "1e-09", "mode": "across"}
    assert list(block.data) == ["shift", "max", "eps", "mode"]


@pytest.mark.parametrize("key", ["type", "name", "op"])
def test_custom_attributes_cannot_set_the_layers_identity(blocks, tmp_path, key):
    proto, weights = blocks
    config = write_json(tmp_path / "bad.json", [dict(SCOPE_TEMPLATE[0], custom_attributes={key: "Convolution"})])
    with pytest.raises(Error, match=f"custom_attributes may not set '{key}'"):
        convert_api(input_model=weights, input_proto=proto, extensions=HSWISH_EXT,
                    tensorflow_use_custom_operations_config=config)


def test_a_custom_attribute_no_ir_can_hold_is_an_error(blocks, tmp_path):
    proto, weights = blocks
    desc = [dict(SCOPE_TEMPLATE[0], custom_attributes={"shift": 3.0, "max": 6.0, "table": {"a": 1}})]
    config = write_json(tmp_path / "bad.json", desc)
    with pytest.raises(Error, match="Layer 'act1' \\(HSwishBlock\\), attribute 'table': cannot write a value of type dict"):
        convert_api(input_model=weights, input_proto=proto, extensions=HSWISH_EXT,
                    tensorflow_use_custom_operations_config=config)


def test_points_side_branch_reaching_the_model_input_is_faq_74(mvn, tmp_path):
    """With only `mean` as a start, the centring Bias reads conv1 through a side branch
    (step 2 walks back to the model's input)."""
    proto, weights, _ = mvn
    desc = dict(POINTS, instances={"start_points": ["mean"], "end_points": ["normalized"]})
    with pytest.raises(Error) as info:
        convert_api(input_model=weights, input_proto=proto, extensions=MVN_POINTS_EXT,
                    tensorflow_use_custom_operations_config=write_json(tmp_path / "p.json", [desc]))
    assert info.value.faq == 74 and "Sub-graph contains network input node 'data'" in str(info.value)


def test_points_end_not_reachable_is_faq_73(mvn, tmp_path):
    proto, weights, _ = mvn
    desc = dict(POINTS, instances={"start_points": ["mean", "centered"], "end_points": ["normalized", "conv1"]})
    with pytest.raises(Error) as info:
        convert_api(input_model=weights, input_proto=proto, extensions=MVN_POINTS_EXT,
                    tensorflow_use_custom_operations_config=write_json(tmp_path / "p.json", [desc]))
    assert info.value.faq == 73 and "End node 'conv1' is not reachable from start nodes: mean, centered" in str(
        info.value)


def test_points_unknown_node_name(mvn, tmp_path):
    proto, weights, _ = mvn
    desc = dict(POINTS, instances={"start_points": ["mean", "nosuch"], "end_points": ["normalized"]})
    with pytest.raises(Error, match="The start point\\(s\\) 'nosuch' of replacement 'MVNByPoints'"):
        convert_api(input_model=weights, input_proto=proto, extensions=MVN_POINTS_EXT,
                    tensorflow_use_custom_operations_config=write_json(tmp_path / "p.json", [desc]))


# --- general ------------------------------------------------------------------------
def test_general_replacer_gets_the_custom_attributes(blocks, tmp_path):
    proto, weights = blocks
    ext = tmp_path / "ext" / "front"
    ext.mkdir(parents=True)
    write_text(str(ext / "general.py"), (
        "from core.front.replacement import FrontReplacementFromConfigFileGeneral\n\n\n"
        "class ScaleShifts(FrontReplacementFromConfigFileGeneral):\n"
        "    replacement_id = 'PowerShift'\n\n"
        "    def transform_graph(self, graph, replacement_descriptions):\n"
        "        for node in graph.op_nodes(op='Power'):\n"
        "            if node.shift != 0:\n"
        "                node['shift'] = replacement_descriptions['shift']\n"))
    config = write_json(tmp_path / "g.json", [{"id": "PowerShift", "match_kind": "general",
                                               "custom_attributes": {"shift": 0.25}}])
    network = convert_api(input_model=weights, input_proto=proto, extensions=str(tmp_path / "ext"),
                          tensorflow_use_custom_operations_config=config)
    shifts = {layer.name: layer.data["shift"] for layer in network.layers if layer.type == "Power"}
    assert shifts == {"act1/shift": "0.25", "act2/shift": "0.25", "act3/shift": "0.25", "act1/scale": "0",
                      "act2/scale": "0", "act3/scale": "0"}


# --- malformed files and failed matches ---------------------------------------------
def convert_with(blocks, tmp_path, content, **options):
    proto, weights = blocks
    path = tmp_path / "config.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(Error) as info:
        convert_api(input_model=weights, input_proto=proto, extensions=HSWISH_EXT,
                    tensorflow_use_custom_operations_config=str(path), **options)
    return info.value


@pytest.mark.parametrize("content, faq, needle", [
    ('[{"id": "x", "match_kind": "scope",', 69, "line 1, column 36"),
    ("\xff\xfe", 69, "Failed to parse"),
    ({"id": "x"}, 71, "must hold a JSON list"),
    ([{"match_kind": "scope", "instances": ["act1"]}], 70, "does not contain attribute 'id'"),
    ([{"id": 5, "match_kind": "scope", "instances": ["act1"]}], 71, "the 'id' of replacement #1 must be a string"),
    ('[{"id": "x", "match_kind": "scope", "instances": ["act1"], "custom_attributes": {"alpha": NaN}}]', 69,
     "NaN is not a JSON number"),
    ([{"id": "x", "instances": ["act1"]}], 71, "has no 'match_kind'"),
    ([{"id": "x", "match_kind": "sideways", "instances": ["act1"]}], 64, "No class registered for match kind"),
    ([{"id": "x", "match_kind": "scope"}], 65, "No instance(s) is(are) defined"),
    ([{"id": "x", "match_kind": "points", "instances": ["a"]}], 66, "must be a single dictionary"),
    ([{"id": "x", "match_kind": "scope", "instances": ["act1", "("]}], 71, "not a valid regular expression"),
    ([{"id": "x", "match_kind": "scope", "instances": ["act1"], "inputs": [{"node": "a"}]}], 71, "'inputs' must be"),
    ([{"id": "x", "match_kind": "scope", "instances": ["a"]}, {"id": "x", "match_kind": "scope", "instances": ["b"]}],
     71, "have the same id 'x'"),
])
def test_malformed_files(blocks, tmp_path, content, faq, needle):
    if isinstance(content, str) and content.startswith("\xff"):
        (tmp_path / "config.json").write_bytes(b"\xff\xfe\x00")
        proto, weights = blocks
        with pytest.raises(Error) as info:
            convert_api(input_model=weights, input_proto=proto,
                        tensorflow_use_custom_operations_config=str(tmp_path / "config.json"))
        err = info.value
    else:
        err = convert_with(blocks, tmp_path, content)
    assert err.faq == faq and needle in str(err), str(err)


def test_missing_file_is_faq_68(blocks, tmp_path):
    proto, weights = blocks
    with pytest.raises(Error) as info:
        convert_api(input_model=weights, input_proto=proto,
                    tensorflow_use_custom_operations_config=str(tmp_path / "none.json"))
    assert info.value.faq == 68 and "does not exist" in str(info.value)


def test_scope_that_matches_nothing(blocks, tmp_path):
    err = convert_with(blocks, tmp_path, [dict(SCOPE_TEMPLATE[0], instances=["act1", "act9"])])
    assert "The scope 'act9' of replacement 'HSwishBlockReplacer'" in str(err) and "matches no node" in str(err)


def test_node_pattern_that_picks_several_nodes_is_faq_77(blocks, tmp_path):
    desc = dict(SCOPE_TEMPLATE[0], inputs=[[{"node": "s", "port": 0}]], outputs=[{"node": "mul$", "port": 0}])
    err = convert_with(blocks, tmp_path, [desc])
    assert err.faq == 77 and "picks 2 nodes in the instance 'act1'" in str(err)


def test_description_without_replacer_or_op(blocks, tmp_path):
    desc = {k: v for k, v in SCOPE_TEMPLATE[0].items() if k != "op"}
    err = convert_with(blocks, tmp_path, [desc])
    assert "No replacer implements replacement 'HSwishBlockReplacer'" in str(err)
    assert "replacement_id = 'HSwishBlockReplacer'" in str(err)


def test_unknown_op(blocks, tmp_path):
    proto, weights = blocks
    config = write_json(tmp_path / "c.json", SCOPE_TEMPLATE)
    with pytest.raises(Error, match="The op 'HSwishBlock' of replacement 'HSwishBlockReplacer' .* is not a known "
                                    "operation"):
        convert_api(input_model=weights, input_proto=proto, tensorflow_use_custom_operations_config=config)


def test_update_of_a_broken_file_is_faq_72_and_leaves_it_as_it_was(blocks, tmp_path):
    proto, weights = blocks
    path = tmp_path / "broken.json"
    path.write_text('[{"id": "x"')
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("convert", "--input_model", weights, "--input_proto", proto, "--output_dir",
                                   str(out), "--tensorflow_custom_operations_config_update", str(path))
    assert_clean_failure(code, stdout, stderr, str(out), "Cannot update the file", "because it is broken",
                         "question #72")
    assert path.read_text() == '[{"id": "x"'


def test_cli_malformed_json_is_a_clean_failure(blocks, tmp_path):
    proto, weights = blocks
    path = write_text(str(tmp_path / "bad.json"), "[{]")
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("convert", "--input_model", weights, "--input_proto", proto, "--output_dir",
                                   str(out), "--tensorflow_use_custom_operations_config", path)
    assert_clean_failure(code, stdout, stderr, str(out), "Failed to parse custom replacements configuration file",
                         "question #69")
