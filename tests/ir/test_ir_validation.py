"""Hand-damaged IR files are rejected with a precise message naming file and layer."""

import pytest

from ir import IRError, read_ir, write_ir

RELU_FIRST_DIM = '''name="relu1" precision="FP32" type="ReLU">
            <input>
                <port id="0">
                    <dim>1</dim>'''
CONV_EDGE = '<edge from-layer="1" from-port="3" to-layer="2" to-port="0"/>'
SCALE_EDGE = '<edge from-layer="4" from-port="1" to-layer="5" to-port="1"/>'

# (test id, text to replace, replacement, substrings the error must contain)
CASES = [
    ("version", 'version="2"', 'version="7"', ["IR version 7 is not supported"]),
    ("version-text", 'version="2"', 'version="two"', ["version attribute is 'two', not an integer"]),
    ("missing-layer-id", '<layer id="2" name="relu1"', '<layer name="relu1"',
     ["layer 'relu1' has no id attribute"]),
    ("duplicate-layer-id", '<layer id="4" name="scale1"', '<layer id="3" name="scale1"',
     ["layer 'scale1' (id=3) uses the same id as layer 'pool1' (id=3)"]),
    ("dim-not-integer", RELU_FIRST_DIM, RELU_FIRST_DIM.replace("<dim>1</dim>", "<dim>abc</dim>"),
     ["layer 'relu1' (id=2): port 0 dimension 0 is 'abc', not an integer"]),
    ("dim-float", RELU_FIRST_DIM, RELU_FIRST_DIM.replace("<dim>1</dim>", "<dim>2.5</dim>"),
     ["layer 'relu1' (id=2): port 0 dimension 0 is '2.5'"]),
    ("dim-negative", RELU_FIRST_DIM, RELU_FIRST_DIM.replace("<dim>1</dim>", "<dim>-1</dim>"),
     ["layer 'relu1' (id=2): port 0 dimension 0 is -1, it must be >= 0"]),
    ("dim-empty", RELU_FIRST_DIM, RELU_FIRST_DIM.replace("<dim>1</dim>", "<dim></dim>"),
     ["layer 'relu1' (id=2): port 0 dimension 0 is missing"]),
    ("duplicate-port-id", '<port id="3">', '<port id="0">', ["layer 'conv1' (id=1) has two ports with id 0"]),
    ("edge-from-missing-layer", SCALE_EDGE, SCALE_EDGE.replace('from-layer="4"', 'from-layer="9"'),
     ["starts at a layer that does not exist", "id=9"]),
    ("edge-to-missing-layer", SCALE_EDGE, SCALE_EDGE.replace('to-layer="5"', 'to-layer="9"'),
     ["ends at a layer that does not exist", "id=9"]),
    ("edge-to-missing-port", SCALE_EDGE, SCALE_EDGE.replace('to-port="1"', 'to-port="7"'),
     ["ends at port 7, which layer 'concat' (id=5) does not have"]),
    ("edge-from-missing-port", SCALE_EDGE, SCALE_EDGE.replace('from-port="1"', 'from-port="7"'),
     ["starts at port 7, which layer 'scale1' (id=4) does not have"]),
    ("edge-from-input-port", SCALE_EDGE, SCALE_EDGE.replace('from-port="1"', 'from-port="0"'),
     ["starts at input port 0 of layer 'scale1' (id=4); edges must start at an output port"]),
    ("edge-into-output-port", SCALE_EDGE, SCALE_EDGE.replace('to-port="1"', 'to-port="2"'),
     ["ends at output port 2 of layer 'concat' (id=5); edges must end at an input port"]),
    ("edge-attribute-not-integer", SCALE_EDGE, SCALE_EDGE.replace('to-port="1"', 'to-port="one"'),
     ["edge #5 attribute to-port is 'one', not an integer"]),
    ("input-port-unfed", SCALE_EDGE, "", ["input port 1 of layer 'concat' (id=5) has no incoming edge"]),
    ("input-port-fed-twice", SCALE_EDGE,
     SCALE_EDGE + '<edge from-layer="0" from-port="0" to-layer="2" to-port="0"/>',
     ["input port 0 of layer 'relu1' (id=2) has 2 incoming edges"]),
    ("result-missing-layer", "</edges>", '</edges><results><result layer="9" port="0"/></results>',
     ["<result layer=9 port=0> names a layer that does not exist"]),
    ("result-input-port", "</edges>", '</edges><results><result layer="2" port="0"/></results>',
     ["<result layer=2 port=0>: port 0 is not an output of layer 'relu1' (id=2)"]),
    ("result-not-integer", "</edges>", '</edges><results><result layer="2" port="x"/></results>',
     ["result #0 attribute port is 'x', not an integer"]),
    ("cycle", CONV_EDGE, CONV_EDGE.replace('from-layer="1" from-port="3"', 'from-layer="5" from-port="2"'),
     ["cycle through layer 'relu1' (id=2) -> layer 'pool1' (id=3) -> layer 'concat' (id=5) -> layer 'relu1' (id=2)"]),
    ("blob-beyond-bin", '<biases offset="432"', '<biases offset="440"',
     ["layer 'conv1' (id=1): blob <biases> (offset 440, size 16) ends at byte 456", "(448 bytes)"]),
    ("blob-size-not-multiple", '<biases offset="432" size="16"', '<biases offset="432" size="14"',
     ["layer 'conv1' (id=1): blob <biases> size 14 is not a multiple of 4 bytes", "FP32"]),
    ("blob-negative-offset", '<biases offset="432"', '<biases offset="-4"',
     ["layer 'conv1' (id=1): blob <biases> offset is -4, it must be >= 0"]),
    ("blob-negative-size", 'size="16"', 'size="-16"',
     ["layer 'conv1' (id=1): blob <biases> size is -16, it must be >= 0"]),
    ("blob-offset-hex", '<biases offset="432"', '<biases offset="0x1b0"',
     ["layer 'conv1' (id=1): blob <biases> offset is '0x1b0', not an integer"]),
    ("unknown-precision", 'name="conv1" precision="FP32"', 'name="conv1" precision="INT8"',
     ["layer 'conv1' (id=1) has unknown precision 'INT8'"]),
    ("missing-precision", 'name="relu1" precision="FP32"', 'name="relu1"',
     ["layer 'relu1' (id=2) has no precision attribute"]),
    ("missing-type", 'type="ReLU"', "", ["layer 'relu1' (id=2) has no type attribute"]),
]


@pytest.fixture
def good_ir(tmp_path, sample_net):
    xml = tmp_path / "model.xml"
    write_ir(sample_net, xml)
    return xml


def _edit(xml, old, new):
    text = xml.read_text()
    assert text.count(old) == 1, f"test edit target not unique: {old!r}"
    xml.write_text(text.replace(old, new))


def _error(xml, **kwargs) -> str:
    with pytest.raises(IRError) as info:
        read_ir(xml, **kwargs)
    text = str(info.value)
    assert str(xml) in text  # names the file
    assert "\n" not in text  # one line for the CLI
    return text


@pytest.mark.parametrize("old,new,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_damaged_ir_is_rejected(good_ir, old, new, expected):
    assert read_ir(good_ir)  # the unedited file is fine
    _edit(good_ir, old, new)
    text = _error(good_ir)
    for part in expected:
        assert part in text


def test_fp16_layer_with_odd_blob_size(good_ir):
    _edit(good_ir, 'name="conv1" precision="FP32"', 'name="conv1" precision="FP16"')
    conv = read_ir(good_ir).layer_by_name("conv1")  # 432 and 16 bytes: fine as FP16
    assert conv.blobs["weights"].size == 216
    _edit(good_ir, 'size="432"', 'size="431"')
    assert "layer 'conv1' (id=1): blob <weights> size 431 is not a multiple of 2 bytes" in _error(good_ir)


def test_truncated_bin(good_ir):
    bin_ = good_ir.with_suffix(".bin")
    bin_.write_bytes(bin_.read_bytes()[:440])
    text = _error(good_ir)
    assert "layer 'conv1' (id=1): blob <biases> (offset 432, size 16) ends at byte 448, beyond the end" in text
    assert str(bin_) in text


def test_missing_bin(good_ir):
    good_ir.with_suffix(".bin").unlink()
    assert "cannot find the IR weights (.bin) file" in _error(good_ir)


def test_not_an_ir(tmp_path):
    xml = tmp_path / "graph.xml"
    xml.write_text('<?xml version="1.0" ?>\n<graph><layers/></graph>\n')
    assert "not an IR file: the root element is <graph>" in _error(xml)


def test_not_well_formed(good_ir):
    good_ir.write_bytes(good_ir.read_bytes()[:500])
    assert "not well-formed XML at line" in _error(good_ir)


def test_missing_xml(tmp_path):
    with pytest.raises(IRError, match="cannot find the IR topology"):
        read_ir(tmp_path / "nope.xml")
