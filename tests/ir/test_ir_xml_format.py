"""The writer's XML is the reference example's XML, character for character."""

import numpy as np

from ir import Edge, Layer, Network, Port, read_ir, to_xml_string, write_ir

# The first example of the reference guide's "model cutting" section (three layers:
# Input -> Convolution -> ReLU), with the document's indentation removed.
REFERENCE_XML = '''\
<?xml version="1.0" ?>
<net batch="1" name="model" version="2">
    <layers>
        <layer id="3" name="input" precision="FP32" type="Input">
            <output>
                <port id="0">
                    <dim>1</dim>
                    <dim>3</dim>
                    <dim>224</dim>
                    <dim>224</dim>
                </port>
            </output>
        </layer>
        <layer id="5" name="InceptionV1/InceptionV1/Conv2d_1a_7x7/convolution" precision="FP32" type="Convolution">
            <data dilation-x="1" dilation-y="1" group="1" kernel-x="7" kernel-y="7" output="64" pad-x="2" pad-y="2" stride="1,1,2,2" stride-x="2" stride-y="2"/>
            <input>
                <port id="0">
                    <dim>1</dim>
                    <dim>3</dim>
                    <dim>224</dim>
                    <dim>224</dim>
                </port>
            </input>
            <output>
                <port id="3">
                    <dim>1</dim>
                    <dim>64</dim>
                    <dim>112</dim>
                    <dim>112</dim>
                </port>
            </output>
            <blobs>
                <weights offset="0" size="37632"/>
                <biases offset="37632" size="256"/>
            </blobs>
        </layer>
        <layer id="6" name="InceptionV1/InceptionV1/Conv2d_1a_7x7/Relu" precision="FP32" type="ReLU">
            <input>
                <port id="0">
                    <dim>1</dim>
                    <dim>64</dim>
                    <dim>112</dim>
                    <dim>112</dim>
                </port>
            </input>
            <output>
                <port id="1">
                    <dim>1</dim>
                    <dim>64</dim>
                    <dim>112</dim>
                    <dim>112</dim>
                </port>
            </output>
        </layer>
    </layers>
    <edges>
        <edge from-layer="3" from-port="0" to-layer="5" to-port="0"/>
        <edge from-layer="5" from-port="3" to-layer="6" to-port="0"/>
    </edges>
</net>
'''


def _inception_stem() -> Network:
    rng = np.random.default_rng(7)
    image, features = (1, 3, 224, 224), (1, 64, 112, 112)
    conv_data = {"dilation-x": "1", "dilation-y": "1", "group": "1", "kernel-x": "7", "kernel-y": "7",
                 "output": "64", "pad-x": "2", "pad-y": "2", "stride": "1,1,2,2", "stride-x": "2",
                 "stride-y": "2"}
    return Network("model", [
        Layer(3, "input", "Input", outputs=[Port(0, image)]),
        Layer(5, "InceptionV1/InceptionV1/Conv2d_1a_7x7/convolution", "Convolution", data=conv_data,
              inputs=[Port(0, image)], outputs=[Port(3, features)],
              blobs={"weights": rng.standard_normal((64, 3, 7, 7)).astype(np.float32),   # GOIYX
                     "biases": rng.standard_normal(64).astype(np.float32)}),
        Layer(6, "InceptionV1/InceptionV1/Conv2d_1a_7x7/Relu", "ReLU",
              inputs=[Port(0, features)], outputs=[Port(1, features)]),
    ], [Edge(3, 0, 5, 0), Edge(5, 3, 6, 0)], batch=1)


def test_xml_matches_the_reference_example_exactly():
    assert to_xml_string(_inception_stem()) == REFERENCE_XML


def test_written_file_is_the_same_text_and_reads_back(tmp_path):
    net = _inception_stem()
    xml = tmp_path / "model.xml"
    write_ir(net, xml)
    assert xml.read_text(encoding="utf-8") == to_xml_string(net)
    assert xml.with_suffix(".bin").stat().st_size == 37632 + 256
    assert read_ir(xml) == net


def test_the_reference_example_itself_is_readable(tmp_path):
    xml = tmp_path / "reference.xml"
    xml.write_text(REFERENCE_XML)
    (tmp_path / "reference.bin").write_bytes(bytes(37632 + 256))
    net = read_ir(xml)
    assert [layer.type for layer in net.topological_order()] == ["Input", "Convolution", "ReLU"]
    conv = net.layer_by_id(5)
    assert conv.data["stride"] == "1,1,2,2"
    assert conv.blobs["weights"].shape == (9408,) and conv.blobs["biases"].shape == (64,)
    assert net.outputs() == [(net.layer_by_id(6), net.layer_by_id(6).outputs[0])]
