"""Attribute string helpers: parsing for consumers, formatting for producers."""

import numpy as np
import pytest

from ir import IRError, as_bool, as_float, as_int, floats, fmt_value, ints


def test_parsers():
    assert ints("1,2,3") == [1, 2, 3]
    assert ints("1, -2") == [1, -2]
    assert ints("") == []
    assert floats("0.5,1,2e-3,inf") == [0.5, 1.0, 0.002, float("inf")]
    assert as_int("-7") == -7
    assert as_float("9.9999997e-05") == pytest.approx(1e-4)
    assert as_bool("1") is True and as_bool("true") is True and as_bool("False") is False
    assert as_bool("0") is False


@pytest.mark.parametrize("call,text", [
    (ints, "1,x,3"), (ints, "1.5"), (floats, "1,,2"), (floats, "1_0"),
    (as_int, "3.0"), (as_int, "0x10"), (as_int, "1_000"), (as_int, ""),
    (as_float, "one"), (as_bool, "yes"), (as_bool, ""),
])
def test_parsers_name_the_attribute_on_bad_text(call, text):
    with pytest.raises(IRError) as info:
        call(text, "pad-x", where="model.xml: layer 'conv1' (id=5)")
    message = str(info.value)
    assert "'pad-x'" in message and repr(text) in message and "conv1" in message


@pytest.mark.parametrize("value,text", [
    (True, "1"), (False, "0"), (np.bool_(True), "1"),
    (3, "3"), (np.int64(-4), "-4"),
    (0.5, "0.5"), (0.1, "0.1"), (1e-5, "1e-05"), (2.0, "2"), (np.float32(0.0625), "0.0625"),
    (9.9999997e-05, "0.0001"), (1 / 3, "0.33333334"), (float("inf"), "inf"), (-np.inf, "-inf"),
    ([1, 1, 2, 2], "1,1,2,2"), ((0.5, True), "0.5,1"), (np.array([[1, 2], [3, 4]]), "1,2,3,4"),
    ("same_upper", "same_upper"), ([], ""),
])
def test_fmt_value(value, text):
    assert fmt_value(value) == text


def test_fmt_value_nan():
    assert fmt_value(float("nan")) == "nan" and np.isnan(as_float("nan"))


def test_fmt_value_round_trips_every_float32_and_is_short():
    rng = np.random.default_rng(0)
    values = np.concatenate([
        rng.standard_normal(2000).astype(np.float32),
        (rng.standard_normal(2000) * 10.0 ** rng.integers(-40, 38, 2000)).astype(np.float32),
        np.array([np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1e-45, -0.0], np.float32),
    ])
    for v in values:
        text = fmt_value(v)
        assert np.float32(float(text)) == v, (v, text)
        mantissa = text.lstrip("-").split("e")[0]
        assert len(mantissa.replace(".", "").lstrip("0")) <= 9  # at most 9 significant digits
    assert fmt_value(np.float32(0.1)) == "0.1"  # shortest, not '0.100000001'


def test_fmt_value_rejects_other_types():
    with pytest.raises(IRError, match="NoneType"):
        fmt_value(None)
    with pytest.raises(IRError, match="dict"):
        fmt_value({"a": 1})
