"""Write then read back: nothing is lost, blobs are deduplicated, helpers work."""

import numpy as np
import pytest

from ir import Edge, IRError, Layer, Network, Port, read_ir, to_xml_string, write_ir


def test_round_trip_is_lossless(tmp_path, sample_net):
    xml = tmp_path / "out" / "sample.xml"
    assert write_ir(sample_net, xml) == []
    assert xml.exists() and xml.with_suffix(".bin").exists()

    back = read_ir(xml)
    assert back == sample_net  # Layer.__eq__ compares blobs by dtype and bytes
    assert back.name == "sample" and back.batch == 1 and back.version == 2
    assert back.meta == sample_net.meta
    assert back.edges == sample_net.edges
    for orig, got in zip(sample_net.layers, back.layers):
        assert (got.id, got.name, got.type, got.precision) == (orig.id, orig.name, orig.type, orig.precision)
        assert list(got.data.items()) == list(orig.data.items())  # order kept
        assert got.inputs == orig.inputs and got.outputs == orig.outputs
        assert list(got.blobs) == list(orig.blobs)
        for key, blob in got.blobs.items():
            assert blob.ndim == 1 and blob.dtype == np.float32
            assert not blob.flags.writeable
            assert blob.tobytes() == orig.blobs[key].tobytes()

    # Writing what was read gives the same files again.
    xml2 = tmp_path / "again.xml"
    write_ir(back, xml2)
    assert xml2.read_bytes() == xml.read_bytes()
    assert xml2.with_suffix(".bin").read_bytes() == xml.with_suffix(".bin").read_bytes()


def test_bin_is_the_blobs_back_to_back(tmp_path, sample_net):
    xml = tmp_path / "m.xml"
    write_ir(sample_net, xml)
    conv = sample_net.layer_by_name("conv1")
    expected = conv.blobs["weights"].tobytes() + conv.blobs["biases"].tobytes()
    assert xml.with_suffix(".bin").read_bytes() == expected
    text = xml.read_text()
    assert '<weights offset="0" size="432"/>' in text
    assert '<biases offset="432" size="16"/>' in text


def test_explicit_bin_path_and_meta_omitted_when_empty(tmp_path, sample_net):
    sample_net.meta = {}
    xml, bin_ = tmp_path / "a" / "net.xml", tmp_path / "b" / "weights.data"
    write_ir(sample_net, xml, bin_)
    assert "meta_data" not in xml.read_text()
    assert read_ir(xml, bin_) == sample_net


def test_identical_blobs_are_stored_once(tmp_path, sample_net):
    conv = sample_net.layer_by_name("conv1")
    twin = Layer(6, "conv2", "Convolution", data=dict(conv.data),
                 inputs=[Port(0, (1, 8, 8, 8))], outputs=[Port(1, (1, 4, 8, 8))],
                 # same weights (other shape object, same bytes) and biases that equal
                 # nothing else
                 blobs={"weights": conv.blobs["weights"].copy(),
                        "biases": np.array([9, 8, 7, 6], np.float32)})
    sample_net.layers.append(twin)
    sample_net.edges.append(Edge(5, 2, 6, 0))
    xml = tmp_path / "d.xml"
    write_ir(sample_net, xml)

    text = xml.read_text()
    assert text.count('<weights offset="0" size="432"/>') == 2
    assert '<biases offset="448" size="16"/>' in text
    assert xml.with_suffix(".bin").stat().st_size == 432 + 16 + 16  # not 432 * 2 + 32

    back = read_ir(xml)
    assert back == sample_net
    assert back.layer_by_name("conv2").blobs["weights"].tobytes() == conv.blobs["weights"].tobytes()


def test_integer_blobs_are_written_as_is(tmp_path):
    idx = np.array([3, -1, 70000], np.int32)
    net = Network("ints", [Layer(0, "in", "Input", outputs=[Port(0, (1, 3))]),
                           Layer(1, "g", "Gather", inputs=[Port(0, (1, 3))], outputs=[Port(1, (1, 3))],
                                 blobs={"indices": idx})],
                  [Edge(0, 0, 1, 0)])
    xml = tmp_path / "i.xml"
    write_ir(net, xml, precision="FP16")
    assert xml.with_suffix(".bin").read_bytes() == idx.tobytes()
    # IR v2 does not record blob dtypes: the consumer reinterprets the bytes.
    got = read_ir(xml).layers[1].blobs["indices"]
    assert got.view(np.int32).tolist() == [3, -1, 70000]


def test_attribute_values_are_escaped(tmp_path):
    name = 'a<b>&"c"\tnew\nline'
    net = Network('n"&<', [Layer(0, name, "Input", data={"k": name}, outputs=[Port(0, (1,))])], [])
    xml = tmp_path / "e.xml"
    write_ir(net, xml)
    back = read_ir(xml)
    assert back.name == 'n"&<'
    assert back.layers[0].name == name and back.layers[0].data["k"] == name


def test_writer_rejects_bad_networks(tmp_path, sample_net):
    sample_net.layers[2].data["negative_slope"] = 0.1  # not a string
    with pytest.raises(IRError, match="negative_slope.*fmt_value"):
        write_ir(sample_net, tmp_path / "x.xml")
    sample_net.layers[2].data = {}
    sample_net.edges.pop()  # concat input 1 now unfed
    with pytest.raises(IRError, match=r"input port 1 of layer 'concat' \(id=5\) has no incoming edge"):
        to_xml_string(sample_net)
    assert list(tmp_path.iterdir()) == []


def test_ir_without_blobs_needs_no_bin(tmp_path):
    net = Network("tiny", [Layer(0, "in", "Input", outputs=[Port(0, (1, 2))]),
                           Layer(1, "r", "ReLU", inputs=[Port(0, (1, 2))], outputs=[Port(1, (1, 2))])],
                  [Edge(0, 0, 1, 0)])
    xml = tmp_path / "t.xml"
    write_ir(net, xml)
    xml.with_suffix(".bin").unlink()
    assert read_ir(xml) == net


def test_network_helpers(sample_net):
    assert [layer.name for layer in sample_net.inputs()] == ["data"]
    assert [(layer.name, port.id) for layer, port in sample_net.outputs()] == [("concat", 2)]
    assert sample_net.layer_by_id(3).name == "pool1"
    assert sample_net.layer_by_name("relu1").id == 2
    with pytest.raises(KeyError):
        sample_net.layer_by_id(42)
    # A shuffled layer list still comes back producers-first.
    sample_net.layers.reverse()
    order = [layer.name for layer in sample_net.topological_order()]
    assert order.index("data") < order.index("conv1") < order.index("relu1")
    assert order.index("pool1") < order.index("concat") and order.index("scale1") < order.index("concat")


def test_results_that_layers_also_read(tmp_path, sample_net):
    """<results>: a model output that layers also read (relu1's port 1 feeds pool1) is an output
    too, in file order; written only when there is one."""
    assert "<results>" not in to_xml_string(sample_net)
    sample_net.results = [(2, 1)]
    assert [(layer.name, port.id) for layer, port in sample_net.outputs()] == [("relu1", 1), ("concat", 2)]
    write_ir(sample_net, tmp_path / "r.xml")
    assert read_ir(tmp_path / "r.xml").results == [(2, 1)]


def test_version_3_with_the_same_shape_is_accepted(tmp_path, sample_net):
    sample_net.version = 3
    xml = tmp_path / "v3.xml"
    write_ir(sample_net, xml)
    assert '<net batch="1" name="sample" version="3">' in xml.read_text()
    assert read_ir(xml) == sample_net


def test_catalog_legacy_layout_and_unknown_elements(tmp_path):
    """The catalog's older form: <convolution_data>, <weights>/<biases> directly
    under <layer>; unknown children are ignored."""
    weights = np.arange(8, dtype=np.float32)
    biases = np.array([1, 2], np.float32)
    (tmp_path / "old.bin").write_bytes(weights.tobytes() + biases.tobytes())
    (tmp_path / "old.xml").write_text("""<?xml version="1.0" ?>
<net batch="1" name="old" version="2">
    <layers>
        <layer id="0" name="in" precision="FP32" type="Input">
            <output><port id="0"><dim>1</dim><dim>4</dim></port></output>
        </layer>
        <layer id="1" name="fc" precision="FP32" type="FullyConnected">
            <fc_data out-size="2"/>
            <future_thing foo="bar"><nested/></future_thing>
            <input><port id="0"><dim>1</dim><dim>4</dim></port></input>
            <output><port id="1"><dim>1</dim><dim>2</dim></port></output>
            <weights offset="0" size="32"/>
            <biases offset="32" size="8"/>
        </layer>
    </layers>
    <edges><edge from-layer="0" from-port="0" to-layer="1" to-port="0"/></edges>
    <statistics/>
</net>
""")
    net = read_ir(tmp_path / "old.xml")
    fc = net.layer_by_name("fc")
    assert fc.data == {"out-size": "2"}
    assert list(fc.blobs) == ["weights", "biases"]
    assert fc.blobs["weights"].tolist() == weights.tolist()
    assert fc.blobs["biases"].tolist() == [1.0, 2.0]
