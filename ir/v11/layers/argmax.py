"""ArgMax (Caffe) -> TopK-11 by value, indices converted to f32.

With `axis`: the top_k indices (or, with out_max_val, the values) along it.
Without: per item over everything else flattened, [N, 1, top_k] indices or
[N, 2, top_k] indices then values, padded with 1s to the IR's rank. Caffe puts
the larger index first among equal values (common after a ReLU: zeros), a stable
TopK the smaller one: so TopK runs on the input reversed along the axis and an
index i there is dim - 1 - i. With ties "first" (TensorFlow's) TopK runs on the input.
"""
from __future__ import annotations

import numpy as np

from .base import Mapping, maps


def _top_k(m: Mapping, x, axis: int, k: int, suffix: str, first: bool = False):
    """(values, indices) of the k largest along `axis`, ties to the larger index as in Caffe (`first`: to the
    smaller, as TensorFlow)."""
    shape = list(x.shape)
    dim = shape[axis]
    shape[axis] = k
    attrs = {"axis": axis, "mode": "max", "sort": "value", "index_element_type": "i32", "stable": True}
    k_const = m.model.const(k, name=m.name(f"{suffix}/k"), element_type="i64")
    source = x
    if not first:
        axes = m.model.const(np.array([axis], np.int64), name=m.name(f"{suffix}/reverse/axes"), element_type="i64")
        source = m.model.op("Reverse", [x, axes], list(x.shape), name=m.name(f"{suffix}/reverse"),
                            attrs={"mode": "index"})
    op = m.model.add("TopK", [source, k_const], [shape, shape], name=m.name(suffix), version="opset11",
                     attrs=attrs, element_types=["f32", "i32"])
    values, indices = op.outputs
    if not first:  # (an index of the reversed input)
        last = m.model.const(np.int32(dim - 1), name=m.name(f"{suffix}/last"), element_type="i32")
        indices = m.model.op("Subtract", [last, indices], shape, name=m.name(f"{suffix}/indices"),
                             attrs={"auto_broadcast": "numpy"}, element_type="i32")
    return values, indices


@maps("ArgMax")
def argmax(m: Mapping):
    a = m.attrs
    x = m.inputs[0]
    k, out_max_val, axis, first = a["top_k"], a["out_max_val"], a["axis"], a["ties"] == "first"
    out = m.out_dims()
    if axis is not None:
        axis = axis + len(x.shape) if axis < 0 else axis
        values, indices = _top_k(m, x, axis, k, "topk", first)
        if out_max_val:
            return [m.identity(values)]
        return [m.op("Convert", [indices], out, attrs={"destination_type": "f32"})]
    n = x.shape[0]
    rows = m.reshape(x, (n, int(np.prod(x.shape[1:]))), "flatten")
    values, indices = _top_k(m, rows, 1, k, "topk", first)
    index = m.op("Convert", [indices], (n, k), "indices", attrs={"destination_type": "f32"})
    if not out_max_val:
        return [m.reshape(index, out, None)]
    pair = m.op("Concat", [m.reshape(index, (n, 1, k), "indices3d"), m.reshape(values, (n, 1, k), "values3d")],
                (n, 2, k), "pair", attrs={"axis": 1})
    return [m.reshape(pair, out, None)]
