"""The checked decoding of untrusted tensors (device_daemons/serving/tensors.py, rest_codec.py):
malformed shapes are the protocol's 400s, never an internal error."""
from __future__ import annotations

import orjson
import pytest

from device_daemons.serving.errors import ServingError
from device_daemons.serving.rest_codec import parse_infer
from device_daemons.serving.tensors import MAX_ELEMENTS, check_shape


@pytest.mark.parametrize("shape", [[0, 1 << 40, 1 << 40], [0, 1 << 62], [MAX_ELEMENTS + 1], [1 << 20, 1 << 20]])
def test_shapes_past_the_element_limit_are_refused(shape):
    with pytest.raises(ServingError, match="more than") as ei:
        check_shape(shape, "input 'x'")
    assert ei.value.status == 400


@pytest.mark.parametrize("binary", [False, True])
def test_a_zero_sized_tensor_with_a_huge_dim_is_a_bad_request(binary):
    item = {"name": "x", "datatype": "FP32", "shape": [0, 1 << 40, 1 << 40]}
    item.update({"parameters": {"binary_data_size": 0}} if binary else {"data": []})
    body = orjson.dumps({"inputs": [item]})
    with pytest.raises(ServingError) as ei:
        parse_infer(body, str(len(body)) if binary else None, "m", "")
    assert ei.value.status == 400


def test_a_zero_sized_tensor_of_small_dims_decodes():
    body = orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [0, 3], "data": []}]})
    assert parse_infer(body, None, "m", "").inputs["x"].shape == (0, 3)
