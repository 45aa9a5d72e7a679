"""FullyConnected (Caffe InnerProduct) -> Reshape to [rows..., I], MatMul with the
OI weights transposed, Add of the biases. `axis` (default 1) is where the
flattening starts: the output is input_shape[:axis] + [out-size]. MatMul -> MatMul."""
from __future__ import annotations

import numpy as np

from .base import Mapping, maps


@maps("FullyConnected", "InnerProduct")
def fully_connected(m: Mapping):
    a = m.attrs
    x = m.inputs[0]
    out = m.out_dims()
    o = a["out-size"]
    rank = len(x.shape)
    axis = a["axis"] + rank if a["axis"] < 0 else a["axis"]
    if not 0 <= axis < rank:
        raise a.error(f"axis {a['axis']} is out of range for a {rank}-D input")
    lead = tuple(x.shape[:axis])
    in_size = int(np.prod(x.shape[axis:]))
    w = a.blob("weights", size=o * in_size)
    rows = m.reshape(x, lead + (in_size,), "flatten")
    weights = m.const(w.reshape(o, in_size), "weights")
    biases = a.blob("biases", required=False, size=o)
    y = m.op("MatMul", [rows, weights], out, None if biases is None else "WithoutBiases",
             attrs={"transpose_a": False, "transpose_b": True})
    if biases is not None:
        bias = m.const(biases.reshape((1,) * (len(out) - 1) + (o,)), "biases")
        y = m.op("Add", [y, bias], out, attrs={"auto_broadcast": "numpy"})
    return [y]


@maps("MatMul")
def matmul(m: Mapping):
    a, b = m.inputs
    return [m.op("MatMul", [a, b], m.out_dims(), attrs={"transpose_a": m.attrs["transpose_a"],
                                                 "transpose_b": m.attrs["transpose_b"]})]
