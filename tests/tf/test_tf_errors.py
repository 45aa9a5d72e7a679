"""Bad TensorFlow input: one clear `[ ERROR ]` (what, where, what to do, the FAQ
number), exit status 1, no traceback, no output files."""
import os

import numpy as np

from tests.convert.test_errors import assert_clean_failure
from tests.support import run_cli
from tests.tf.own_graphs import conv2d, const, graph, node, placeholder, save, small_cnn


def convert(outdir, *args):
    return run_cli("convert", "--output_dir", str(outdir), "--model_name", "m", *args)


def test_truncated_pb(tmp_path, tf_graphs):
    data = open(tf_graphs.path("conv_bias_relu"), "rb").read()
    cut = tmp_path / "cut.pb"
    cut.write_bytes(data[: len(data) // 2])
    res = convert(tmp_path / "out", "--input_model", str(cut), "-b", "1")
    assert_clean_failure(*res, tmp_path / "out", "cut.pb", "corrupt, truncated", "#43")


def test_garbled_pb(tmp_path, tf_graphs):
    data = bytearray(open(tf_graphs.path("conv_bias_relu"), "rb").read())
    data[2:40] = np.random.default_rng(0).integers(0, 256, 38, dtype=np.uint8).tobytes()
    bad = tmp_path / "garbled.pb"
    bad.write_bytes(bytes(data))
    res = convert(tmp_path / "out", "--input_model", str(bad), "-b", "1")
    assert_clean_failure(*res, tmp_path / "out", "garbled.pb")


def test_text_graph_without_the_flag(tmp_path):
    g, _ = small_cnn()
    txt = save(g, tmp_path / "cnn.pb", text=True)
    res = convert(tmp_path / "out", "--input_model", txt, "-b", "1")
    assert_clean_failure(*res, tmp_path / "out", "--input_model_is_text", "#42")


def test_binary_graph_with_the_text_flag(tmp_path):
    g, _ = small_cnn()
    pb = save(g, tmp_path / "cnn.pbtxt")
    res = convert(tmp_path / "out", "--input_model", pb, "--input_model_is_text", "-b", "1")
    assert_clean_failure(*res, tmp_path / "out", "cnn.pbtxt", "#42")


def test_graph_with_a_cycle(tmp_path):
    g = graph(placeholder("x", (1, 4)), node("a", "AddV2", ["x", "b"]), node("b", "Relu", ["a"]),
              node("out", "Relu", ["b"]))
    res = convert(tmp_path / "out", "--input_model", save(g, tmp_path / "cycle.pb"))
    assert_clean_failure(*res, tmp_path / "out", "cycle", "#93")


def test_unknown_input_name(tmp_path):
    g, _ = small_cnn()
    res = convert(tmp_path / "out", "--input_model", save(g, tmp_path / "cnn.pb"), "--input", "nope",
                  "--input_shape", "[1,8,8,3]")
    assert_clean_failure(*res, tmp_path / "out", "nope", "#25")


def test_wrong_attribute_type(tmp_path):
    g = graph(placeholder("x", (1, 8, 8, 3)), const("w", np.ones((3, 3, 3, 2), np.float32)), conv2d("conv", "x", "w"))
    g.node[2].attr["strides"].s = b"1,1,1,1"  # TensorFlow defines strides as a list of ints
    res = convert(tmp_path / "out", "--input_model", save(g, tmp_path / "attr.pb"))
    assert_clean_failure(*res, tmp_path / "out", "'conv' (Conv2D)", "'strides' is a string", "list of ints")


def test_every_unsupported_op_is_listed_at_once(tmp_path):
    g = graph(placeholder("x", (1, 4)), node("c1", "Cumprod", ["x", "x"]), node("c2", "Cumprod", ["c1", "x"]),
              node("e", "Lgamma", ["c2"]), node("r", "Relu", ["e"]), node("ig", "Igamma", ["r", "x"]))
    res = convert(tmp_path / "out", "--input_model", save(g, tmp_path / "ops.pb"))
    assert_clean_failure(*res, tmp_path / "out", "Cumprod (2 nodes): c1, c2", "Lgamma (1 node): e",
                         "Igamma (1 node): ig", "4 nodes of 3 types", "--extensions", "--input/--output", "#23")


def test_a_cast_that_wraps_integers_around_is_unsupported(tmp_path):
    """int32 -> int8 of the model's data wraps the values around, which the IR's floating point does not: named
    as unsupported (the TF worker can run it), the casts the IR holds around it not."""
    def cast(name, src, from_type, to_type):
        n = node(name, "Cast", [src])
        del n.attr["T"]
        n.attr["SrcT"].type, n.attr["DstT"].type = from_type, to_type
        return n
    dt_float, dt_int32, dt_int8 = 1, 3, 6
    g = graph(placeholder("x", (1, 4)), cast("i", "x", dt_float, dt_int32), cast("narrow", "i", dt_int32, dt_int8),
              cast("f", "narrow", dt_int8, dt_float))
    res = convert(tmp_path / "out", "--input_model", save(g, tmp_path / "cast.pb"))
    assert_clean_failure(*res, tmp_path / "out", "'narrow' (Cast)", "from int32 to int8, which wraps", "#23")


def test_node_reading_a_missing_node(tmp_path):
    g = graph(placeholder("x", (1, 4)), node("r", "Relu", ["missing:0"]))
    res = convert(tmp_path / "out", "--input_model", save(g, tmp_path / "ref.pb"))
    assert_clean_failure(*res, tmp_path / "out", "'missing'", "#24")


def test_unknown_batch_needs_b(tmp_path):
    g, _ = small_cnn()
    res = convert(tmp_path / "out", "--input_model", save(g, tmp_path / "cnn.pb"))
    assert_clean_failure(*res, tmp_path / "out", "'x'", "-b")


def test_failed_conversion_keeps_an_earlier_ir(tmp_path):
    g, _ = small_cnn()
    pb = save(g, tmp_path / "cnn.pb")
    out = tmp_path / "out"
    code, _, err = convert(out, "--input_model", pb, "-b", "1")
    assert code == 0, err
    before = {f: (out / f).read_bytes() for f in ("m.xml", "m.bin")}
    code, _, err = convert(out, "--input_model", pb)  # fails: unknown batch
    assert code == 1 and "[ ERROR ]" in err
    assert {f: (out / f).read_bytes() for f in before} == before
    assert sorted(os.listdir(out)) == ["m.bin", "m.xml"]


def test_fake_quant_errors(tmp_path):
    """A range per channel on the model's data is not converted (it offloads), an empty range and a num_bits
    outside 2 .. 16 are errors naming the node."""
    cases = [(node("fq", "FakeQuantWithMinMaxVarsPerChannel", ["x", "lo", "hi"]), [-1.0, -1.0], [1.0, 2.0],
              ("'fq'", "a range per channel on the model's data", "--offload_unsupported_operations_to_tf")),
             (node("fq", "FakeQuantWithMinMaxVars", ["x", "lo", "hi"]), 1.0, 1.0, ("'fq'", "is empty")),
             (node("fq", "FakeQuantWithMinMaxVars", ["x", "lo", "hi"], num_bits=17), -1.0, 1.0,
              ("'fq'", "num_bits 17"))]
    for i, (fq, lo, hi, needles) in enumerate(cases):
        del fq.attr["T"]  # (the FakeQuant ops have no type attribute)
        g = graph(placeholder("x", [1, 4, 4, 2]), const("lo", np.float32(lo)), const("hi", np.float32(hi)), fq)
        pb = save(g, tmp_path / f"fq{i}.pb")
        res = convert(tmp_path / f"out{i}", "--input_model", pb)
        assert_clean_failure(*res, tmp_path / f"out{i}", *needles)
