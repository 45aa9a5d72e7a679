"""ir/schema: each IR type's attributes declared once, read and written through it."""
import numpy as np
import pytest

from ir import Layer
from ir.schema import (
    REQUIRED, YX, Bool, Enum, Float, Int, Ints, LayerSchema, Same, SchemaError, known_types, layer_schema,
    read_attrs,
)


def layer(type_name, **data):
    return Layer(7, "L", type_name, data={k.replace("_dash_", "-"): v for k, v in data.items()})


def conv(data):
    return Layer(3, "conv", "Convolution", data=data)


def test_convolution_reads_v2_pairs_with_defaults():
    got = layer_schema("Convolution").read(conv({"kernel-x": "3", "kernel-y": "5", "output": "8",
                                                 "stride": "1,1,2,1", "stride-x": "1", "stride-y": "2",
                                                 "pad-x": "1", "pad-y": "2"}))
    assert got == {"dilation": (1, 1), "group": 1, "kernel": (5, 3), "output": 8, "pad": (2, 1),
                   "pad_end": (2, 1), "stride": (2, 1)}


def test_convolution_reads_the_list_spellings_of_later_irs():
    got = layer_schema("Convolution").read(conv({"kernel": "3,5", "output": "8", "strides": "2,1",
                                                 "pads_begin": "1,0", "pads_end": "0,2", "dilations": "2,2"}))
    assert got["kernel"] == (3, 5) and got["stride"] == (2, 1) and got["pad"] == (1, 0)
    assert got["pad_end"] == (0, 2) and got["dilation"] == (2, 2)
    # one value means both axes; a 4-D stride list keeps its last two
    got = layer_schema("Convolution").read(conv({"kernel": "3", "output": "1", "stride": "1,1,4,2"}))
    assert got["kernel"] == (3, 3) and got["stride"] == (4, 2)


def test_a_3d_window_is_written_and_read_as_lists():
    """Volumes (NCDHW): three values per window attribute, written as the later IRs' lists (no -x/-y form);
    those left out take their default on all three axes; a 5-value stride list keeps its last three."""
    schema = layer_schema("Convolution")
    text = schema.write({"kernel": (3, 2, 1), "stride": [1, 2, 2], "pad": (1, 0, 0), "pad_end": (1, 1, 0),
                         "dilation": (2, 1, 1), "group": 1, "output": 4})
    assert text == {"dilations": "2,1,1", "group": "1", "kernel": "3,2,1", "output": "4", "pads_begin": "1,0,0",
                    "pads_end": "1,1,0", "strides": "1,2,2"}
    got = schema.read(conv(text))
    assert (got["kernel"], got["stride"], got["pad"], got["pad_end"], got["dilation"]) == (
        (3, 2, 1), (1, 2, 2), (1, 0, 0), (1, 1, 0), (2, 1, 1))
    got = schema.read(conv({"kernel": "3,3,3", "output": "2", "stride": "1,1,2,1,1"}))
    assert got["stride"] == (2, 1, 1) and got["pad"] == got["pad_end"] == (0, 0, 0) and got["dilation"] == (1, 1, 1)
    assert layer_schema("Pooling").read(layer("Pooling", kernel="2,2,2", pool_dash_method="max"))["stride"] == (
        1, 1, 1)
    with pytest.raises(SchemaError, match="mixes 2-D and 3-D window attributes"):
        schema.read(conv({"kernel": "3,3,3", "output": "2", "strides": "2,2"}))
    with pytest.raises(SchemaError, match=r"takes a \(y, x\) pair or a \(z, y, x\) triple"):
        schema.write({"kernel": (1, 2, 3, 4), "output": 1})


@pytest.mark.parametrize("data, needle", [
    ({"kernel-y": "3", "output": "2"}, "has only one of the attributes 'kernel-x' and 'kernel-y'"),
    ({"output": "2"}, "missing attributes 'kernel-x' and 'kernel-y'"),
    ({"kernel-x": "3", "kernel-y": "3"}, "missing attribute 'output'"),
    ({"kernel-x": "three", "kernel-y": "3", "output": "2"}, "'three', expected an integer"),
    ({"kernel-x": "3", "kernel-y": "3", "output": "2", "dilation-x": "0", "dilation-y": "1"},
     "'dilation-x' is 0; it must be at least 1"),
    ({"kernel-x": "3", "kernel-y": "3", "output": "2", "group": "0"}, "'group' is 0; it must be at least 1"),
])
def test_bad_attributes_are_schema_errors_naming_the_layer(data, needle):
    with pytest.raises(SchemaError) as err:
        layer_schema("Convolution").read(conv(data))
    assert str(err.value).startswith("layer 'conv' (type Convolution, id=3): ")
    assert needle in str(err.value)
    assert err.value.detail in str(err.value) and err.value.layer_name == "conv"


def test_aliases_and_type_aliases():
    assert layer_schema("Softmax") is layer_schema("SoftMax")
    lrn = layer_schema("LRN").read(layer("LRN", alpha="1e-4", beta="0.75", local_size="5", bias="2"))
    assert lrn == {"alpha": 1e-4, "beta": 0.75, "local-size": 5, "region": "across", "k": 2.0}
    fc = read_attrs(layer("InnerProduct", num_output="10"))
    assert fc == {"out-size": 10, "axis": 1}


def test_enums_read_every_accepted_spelling_as_the_canonical_choice():
    elt = layer_schema("Eltwise")
    assert elt.read(layer("Eltwise", operation="prod"))["operation"] == "mul"
    assert elt.read(layer("Eltwise", operation="SUM"))["operation"] == "sum"
    assert elt.read(layer("Eltwise"))["operation"] == "sum"
    det = layer_schema("DetectionOutput").read(layer("DetectionOutput", num_classes="2", code_type="CENTER_SIZE"))
    assert det["code_type"] == "caffe.PriorBoxParameter.CENTER_SIZE"
    with pytest.raises(SchemaError, match="'pool-method' is 'median', which is not one of max, avg"):
        read_attrs(layer("Pooling", kernel="2", pool_dash_method="median"))


def test_pooling_exclude_pad_is_written_as_words_and_read_both_ways():
    pool = layer_schema("Pooling")
    out = pool.write({"kernel": (2, 2), "stride": (2, 2), "pad": (0, 0), "pool-method": "avg",
                      "exclude-pad": False, "rounding_type": "ceil"})
    assert list(out.items()) == [("kernel-x", "2"), ("kernel-y", "2"), ("pad-x", "0"), ("pad-y", "0"),
                                 ("stride", "1,1,2,2"), ("stride-x", "2"), ("stride-y", "2"),
                                 ("pool-method", "avg"), ("exclude-pad", "false"), ("rounding_type", "ceil")]
    for text, value in (("true", True), ("1", True), ("false", False), ("0", False)):
        assert pool.read(layer("Pooling", kernel="2", pool_method="max", exclude_pad=text))["exclude-pad"] is value


def test_write_checks_names_kinds_ranges_and_required():
    conv_schema = layer_schema("Convolution")
    base = {"kernel": np.array([3, 3]), "output": 4}
    assert conv_schema.write(base)["kernel-x"] == "3"
    with pytest.raises(SchemaError, match="has no attribute 'kernel_size'"):
        conv_schema.write({**base, "kernel_size": 3})
    with pytest.raises(SchemaError, match="needs attribute 'output'"):
        conv_schema.write({"kernel": (3, 3)})
    with pytest.raises(SchemaError, match="'stride' is 0,1; it must be at least 1"):
        conv_schema.write({**base, "stride": (0, 1)})
    with pytest.raises(SchemaError, match="'group' takes an integer, got 1.5"):
        conv_schema.write({**base, "group": 1.5})
    with pytest.raises(SchemaError, match="'output' takes an integer, got the bool True"):
        conv_schema.write({"kernel": (3, 3), "output": True})
    with pytest.raises(SchemaError, match="'type' is 'swish', which is not one of"):
        layer_schema("Activation").write({"type": "swish"})
    # None leaves an optional attribute out
    assert "coeff" not in layer_schema("Eltwise").write({"operation": "sum", "coeff": None})


def test_check_lists_every_problem_of_written_data():
    problems = layer_schema("Pooling").check({"kernel-x": "3", "kernel-y": "x", "fancy": "1", "stride-x": "0"})
    assert problems == [
        "attribute 'kernel-y' has value 'x', expected an integer",
        "attribute 'fancy' is not an attribute of IR type Pooling",
        "attribute 'stride-x' is 0; it must be at least 1",
        "required attribute 'pool-method' is missing",
    ]


def sample_value(attr):
    """A valid non-default value of an attribute, for the round trip below."""
    kind = attr.kind
    low = 1 if attr.min is None else int(attr.min) + 1
    if attr.max is not None:
        return int(attr.max) - 1
    return {"int": low + 2, "float": 0.25, "bool": True, "str": "state_a", "ints": [low, low + 1],
            "floats": [0.5, 2.0], "yx": (low + 1, low + 2)}.get(kind) or attr.choices[-1]


@pytest.mark.parametrize("type_name", known_types())
def test_every_schema_round_trips_write_then_read(type_name):
    schema = layer_schema(type_name)
    values = {name: sample_value(attr) for name, attr in schema.attrs.items()}
    data = schema.write(values)
    assert schema.check(data) == []
    assert schema.read(Layer(1, "x", type_name, data=data)) == values


@pytest.mark.parametrize("type_name", known_types())
def test_every_schema_reads_its_defaults(type_name):
    """A layer with only its required attributes reads with every other one defaulted."""
    schema = layer_schema(type_name)
    required = {name: sample_value(attr) for name, attr in schema.attrs.items() if attr.default is REQUIRED}
    got = schema.read(Layer(1, "x", type_name, data=schema.write(required)))
    for name, attr in schema.attrs.items():
        if name in required:
            assert got[name] == required[name]
        elif isinstance(attr.default, Same):
            assert got[name] == got[attr.default.other]
        else:
            want = tuple(attr.default) if attr.kind == "yx" else attr.default
            assert got[name] == want


def test_custom_types_have_no_schema_and_a_custom_schema_works_the_same():
    assert layer_schema("MyCustomLayer") is None
    with pytest.raises(Exception, match="has no schema"):
        read_attrs(layer("MyCustomLayer", a="1"))
    mine = LayerSchema("MyCustomLayer", [Int("n", 2, min=1), Float("f", REQUIRED), Bool("on", False),
                                         Ints("sizes", None), Enum("mode", ("a", "b"), "a"), YX("win", (1, 1))])
    assert mine.read(layer("MyCustomLayer", f="0.5", win_dash_x="4", win_dash_y="3")) == {
        "n": 2, "f": 0.5, "on": False, "sizes": None, "mode": "a", "win": (3, 4)}


def test_declaring_a_name_twice_is_refused():
    with pytest.raises(ValueError, match="declared twice"):
        LayerSchema("T", [Int("a"), Int("a")])
    with pytest.raises(ValueError, match="belongs to two attributes"):
        LayerSchema("T", [Int("a-x"), YX("a")])
