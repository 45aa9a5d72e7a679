"""Memory (the catalog's state between infer calls) -> ReadValue-6 / Assign-6.

An IR v2 Memory is a pair with the same `id`: index 1 has no input and outputs the
state the previous call saved (zeros at first), index 0 takes the new state. They
become a ReadValue (initial value: zeros of the reader's shape) and an Assign of
the OpenVINO variable named by the id; the runtime keeps the state per infer
request and `reset_state()` brings the zeros back.
"""
from __future__ import annotations

import numpy as np

from .base import Mapping, maps


@maps("Memory")
def memory(m: Mapping):
    a = m.attrs
    if a["size"] != 2:
        raise m.attrs.error(f"size {a['size']} is not supported; Memory layers come in pairs (size 2)")
    variable = a["id"]
    if a["index"] == 1:
        if m.inputs or len(m.layer.outputs) != 1:
            raise a.error("the reading Memory layer (index 1) must have no input and one output")
        shape = m.out_dims()
        init = m.const(np.zeros(shape, np.float32), "initial")
        attrs = {"variable_id": variable, "variable_type": "f32", "variable_shape": list(shape)}
        return [m.op("ReadValue", [init], shape, version="opset6", attrs=attrs)]
    if a["index"] != 0:
        raise a.error(f"index {a['index']} must be 0 (the writing layer) or 1 (the reading layer)")
    if len(m.inputs) != 1 or m.layer.outputs:
        raise a.error("the writing Memory layer (index 0) must have one input and no output")
    m.op("Assign", m.inputs, m.inputs[0].shape, version="opset6", attrs={"variable_id": variable})
    return []
