"""Layout and shape ops: Concat (Concat), Split/Slice (VariadicSplit), Reshape and
Flatten (Reshape to the port's shape; leading dims equal to the input's are
written as 0 so that a batch change passes through), Crop (Slice), Permute
(Transpose), Tile (Tile), Gather (Gather-8 of the dictionary constant or input, the indices converted to i32)."""
from __future__ import annotations

import numpy as np

from .base import Mapping, copied_leading_dims, maps


def _axis(m: Mapping, axis: int, rank: int) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise m.attrs.error(f"axis {axis} is out of range for a {rank}-D input")
    return a


@maps("Concat")
def concat(m: Mapping):
    rank = len(m.inputs[0].shape)
    axis = _axis(m, m.attrs["axis"], rank)
    return [m.op("Concat", m.inputs, m.out_dims(), attrs={"axis": axis})]


@maps("Split", "Slice")
def split(m: Mapping):
    x = m.inputs[0]
    axis = _axis(m, m.attrs["axis"], len(x.shape))
    shapes = [tuple(p.dims) for p in m.layer.outputs]
    sizes = [s[axis] if len(s) == len(x.shape) else -1 for s in shapes]
    if -1 in sizes or sum(sizes) != x.shape[axis]:
        raise m.attrs.error(f"output ports {[list(s) for s in shapes]} do not split axis {axis} of the input "
                            f"{list(x.shape)}")
    op = m.model.add("VariadicSplit", [x, m.model.const(axis, name=m.name("axis"), element_type="i64"),
                                       m.ints(sizes, "split_lengths")], shapes, name=m.name())
    return op.outputs


@maps("Reshape", "Flatten")
def reshape(m: Mapping):
    x = m.inputs[0]
    out = m.out_dims()
    target = m.ints(copied_leading_dims(x.shape, out), "shape")
    return [m.op("Reshape", [x, target], out, attrs={"special_zero": True})]


@maps("Crop")
def crop(m: Mapping):
    """The catalog's three forms: axis + offset with the sizes of input 1; axis +
    offset + dim; axis + crop_begin + crop_end."""
    a = m.attrs
    x = m.inputs[0]
    rank = len(x.shape)
    axes = [_axis(m, v, rank) for v in a["axis"]]
    out = m.out_dims()
    if a["crop_begin"] is not None:
        begin = a["crop_begin"]
    else:
        begin = a["offset"] or [0]
        if len(begin) == 1:
            begin = begin * len(axes)
    if len(begin) != len(axes):
        raise a.error(f"has {len(begin)} offsets for {len(axes)} axes {axes}")
    end = [b + out[axis] for b, axis in zip(begin, axes)]
    for b, e, axis in zip(begin, end, axes):
        if b < 0 or e > x.shape[axis]:
            raise a.error(f"cropping [{b}, {e}) does not fit axis {axis} of the input {list(x.shape)}")
    inputs = [x, m.ints(begin, "start"), m.ints(end, "stop"), m.ints([1] * len(axes), "step"), m.ints(axes, "axes")]
    return [m.op("Slice", inputs, out, version="opset8")]


@maps("Permute", "Transpose")
def permute(m: Mapping):
    x = m.inputs[0]
    rank = len(x.shape)
    order = [o + rank if o < 0 else o for o in m.attrs["order"]]
    order += [i for i in range(rank) if i not in order]  # Caffe fills up with the axes not named
    if sorted(order) != list(range(rank)):
        raise m.attrs.error(f"order {m.attrs['order']} is not a permutation of {rank} axes")
    return [m.op("Transpose", [x, m.ints(order, "order")], m.out_dims())]


@maps("Tile")
def tile(m: Mapping):
    x = m.inputs[0]
    axis = _axis(m, m.attrs["axis"], len(x.shape))
    repeats = [1] * len(x.shape)
    repeats[axis] = m.attrs["tiles"]
    return [m.op("Tile", [x, m.ints(repeats, "repeats")], m.out_dims())]


@maps("Gather")
def gather(m: Mapping):
    if len(m.inputs) > 1:  # (the dictionary is the model's data)
        table = m.inputs[1]
    else:
        dims = tuple(int(d) for d in m.attrs["dims"])
        table = m.const(m.attrs.blob("weights", size=int(np.prod(dims))).reshape(dims), "dictionary")
    indices = m.op("Convert", [m.inputs[0]], m.inputs[0].shape, "indices", attrs={"destination_type": "i32"},
                   element_type="i32")
    batch_dims = int(m.attrs["batch_dims"])
    if batch_dims and all(d == 1 for d in table.shape[:batch_dims]):
        # a batch of one is the plain Gather of its indices (OpenVINO 2026.4's CPU plugin crashes on Gather-8
        # with batch_dims over a batch of size 1 - measured; a batch of 2 runs)
        indices = m.reshape(indices, indices.shape[batch_dims:], "unbatched")
        batch_dims = 0
    return [m.op("Gather", [table, indices, m.ints([int(m.attrs["axis"])], "axis")],
                 m.out_dims(), version="opset8", attrs={"batch_dims": batch_dims})]
