"""Joining and splitting: ConcatV2/Concat, Pack, Split, SplitV, Unpack, the
slices StridedSlice and Slice, ReverseV2 (a slice of stride -1 on the reversed axes)
and Roll (per rolled axis, the two crops joined the other way round).

Axes are mapped to the IR layout. A Split whose every part is used is an IR
Split; otherwise each used part is a Crop. StridedSlice resolves TensorFlow's
masks (begin/end/ellipsis/new_axis/shrink_axis) to a begin, stride and size per
input axis: with unit strides it is a Crop, else our StridedSlice layer; a
Reshape after it drops shrunk axes and adds new ones. Pack and Unpack are
Reshape + Concat and Crop + Reshape. A Gather of the model's data at constant
indices is Crops of the runs of consecutive indices joined by a Concat
(gather_slices).
"""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.lowering import TO_NCHW, apply_op, reshape_node, reshaped
from core.front.tf.ops.base import SameShapeOp, TFOp, const_input, expect_inputs, normalize_axis
from core.front.tf.tensors import attr, describe
from core.ops.identity import Identity
from core.ops.shape_ops import Concat, Reshape, Split as IRSplit
from core.ops.slicing import CropRange, StridedSlice as IRStridedSlice


def _concat_shape(node, shapes, axis):
    first = np.array(shapes[0], dtype=np.int64)
    rank = len(first)
    axis = normalize_axis(node, axis, rank)
    for s in shapes[1:]:
        if len(s) != rank or not np.array_equal(np.delete(s, axis), np.delete(first, axis)):
            raise ShapeError("{}: inputs {} differ outside the concatenation axis {}.", describe(node),
                             ", ".join(str(list(x)) for x in shapes), axis)
    first[axis] = sum(int(s[axis]) for s in shapes)
    return first


class ConcatV2(TFOp):
    """ConcatV2: values..., axis; Concat (v1): axis, values..."""
    tf_types = ("ConcatV2", "Concat")

    @staticmethod
    def _split(node, items):
        return (items[:-1], items[-1]) if node.tf_op == "ConcatV2" else (items[1:], items[0])

    @staticmethod
    def extract(node):
        expect_inputs(node, (2, 1 << 20))

    @classmethod
    def _axis(cls, node):
        port = len(node.data_inputs()) - 1 if node.tf_op == "ConcatV2" else 0
        return int(const_input(node, port, "axis").ravel()[0])

    @classmethod
    def evaluate(cls, node, values):
        parts, _ = cls._split(node, values)
        return [np.concatenate(parts, axis=cls._axis(node))]

    @classmethod
    def shape(cls, node, shapes):
        parts, _ = cls._split(node, shapes)
        return [_concat_shape(node, parts, cls._axis(node))]

    @classmethod
    def lower(cls, node, lw):
        parts, _ = cls._split(node, node.data_inputs())
        out = node.out_node(0)
        axis = lw.ir_axis(out, cls._axis(node))
        lw.keep_inputs(node, *parts)
        if len(parts) == 1:
            return lw.retype(node, Identity)
        lw.retype(node, Concat, {"axis": axis})


class Pack(TFOp):
    tf_types = ("Pack",)

    @staticmethod
    def extract(node):
        expect_inputs(node, (1, 1 << 20))
        node.tf["axis"] = attr(node, "axis", "i", 0)

    @staticmethod
    def evaluate(node, values):
        return [np.stack(values, axis=node.tf["axis"])]

    @staticmethod
    def shape(node, shapes):
        first = [int(d) for d in shapes[0]]
        if any(list(s) != first for s in shapes):
            raise ShapeError("{}: inputs of different shapes {}.", describe(node), [list(s) for s in shapes])
        axis = normalize_axis(node, node.tf["axis"], len(first) + 1)
        return [first[:axis] + [len(shapes)] + first[axis:]]

    @staticmethod
    def lower(node, lw):
        out = node.out_node(0)
        shape = lw.tf_shape(out)
        axis = normalize_axis(node, node.tf["axis"], len(shape))
        one = shape.copy()
        one[axis] = 1
        parts = [reshaped(lw, x, one, lw.nchw(out), "{}/part{}".format(node.name, i))
                 for i, x in enumerate(node.data_inputs())]
        lw.keep_inputs(node, *parts)
        if len(parts) == 1:
            return lw.retype(node, Identity)
        lw.retype(node, Concat, {"axis": lw.ir_axis(out, axis)})


def tensor_name(node, port: int) -> str:
    """TensorFlow's name of output `port` of a node: the layer computing it gets this name."""
    return node.name if port == 0 else "{}:{}".format(node.name, port)


def _crop_part(node, lw, x, tf_axis, begin, size, port):
    """Output `port` of node := x[..., begin:begin+size, ...] along tf_axis (a Reshape after
    the Crop when the output's shape is not the cropped one)."""
    out = node.out_node(port)
    lw.graph.remove_edge(node.id, out.id)
    name = tensor_name(node, port)
    shape = lw.tf_shape(x)
    cropped = shape.copy()
    cropped[tf_axis] = size
    direct = np.array_equal(cropped, lw.tf_shape(out))
    crop = lw.new_op(name if direct else name + "/crop", CropRange, {
        "axis": [lw.ir_axis(x, tf_axis)], "crop_begin": [int(begin)], "crop_end": [int(shape[tf_axis] - begin - size)]})
    lw.graph.connect(x, crop, inp=0)
    if direct:
        lw.graph.connect(crop, out, out=0)
        return
    mid = lw.graph.add_data(name + "/crop")
    mid["tf_shape"], mid["nchw"] = cropped, lw.nchw(x)
    lw.graph.connect(crop, mid, out=0)
    reshape = lw.new_op(name, Reshape, {})
    lw.graph.connect(mid, reshape, inp=0)
    lw.graph.connect(reshape, out, out=0)
    reshape_node(lw, reshape)


MAX_GATHER_RUNS = 64  # Crops a Gather of the model's data becomes, at most (more: offloaded)


def index_runs(indices) -> list[list[int]]:
    """[begin, length] of each run of consecutive indices."""
    runs: list[list[int]] = []
    for i in (int(v) for v in np.asarray(indices).ravel()):
        if runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1][1] += 1
        else:
            runs.append([i, 1])
    return runs


def gather_slices(node, lw, x, tf_axis: int, indices) -> None:
    """Output 0 of node := x gathered at constant `indices` along tf_axis (a Gather of the model's data: the BGR
    swap of an input, a choice of channels): each run of consecutive indices a Crop, the runs joined by a Concat,
    a Reshape when the indices are not one axis (a scalar index drops it) - copies only, exact on every device.
    The node itself becomes the last of them."""
    shape = lw.tf_shape(x)
    size = int(shape[tf_axis])
    runs = index_runs(indices)
    if len(runs) > MAX_GATHER_RUNS:
        raise lw.unsupported(node, "a Gather of the model's data at {} separate runs of consecutive indices (the IR "
                                   "copies at most {}: Crops joined by a Concat)".format(len(runs), MAX_GATHER_RUNS))
    ir_axis, nchw = lw.ir_axis(x, tf_axis), lw.nchw(x)
    joined_shape = shape.copy()
    joined_shape[tf_axis] = np.asarray(indices).size

    def crop_attrs(begin, length):
        return {"axis": [ir_axis], "crop_begin": [int(begin)], "crop_end": [int(size - begin - length)]}

    def run(k, begin, length):
        part = shape.copy()
        part[tf_axis] = length
        return apply_op(lw, x, "{}/run{}".format(node.name, k), CropRange, crop_attrs(begin, length), part, nchw)

    whole = runs == [[0, size]]
    if np.array_equal(joined_shape, lw.tf_shape(node.out_node(0))):  # the indices are one axis
        if len(runs) == 1:
            lw.keep_inputs(node, x)
            return lw.retype(node, Identity) if whole else lw.retype(node, CropRange, crop_attrs(*runs[0]))
        lw.keep_inputs(node, *(run(k, *r) for k, r in enumerate(runs)))
        return lw.retype(node, Concat, {"axis": ir_axis})
    if len(runs) == 1:
        joined = x if whole else run(0, *runs[0])
    else:
        op = lw.new_op(node.name + "/joined", Concat, {"axis": ir_axis})
        for k, r in enumerate(runs):
            lw.graph.connect(run(k, *r), op, inp=k)
        joined = lw.tensor_of(op, node.name + "/joined", joined_shape, nchw)
    lw.keep_inputs(node, joined)
    reshape_node(lw, node)


def _lower_parts(node, lw, x, tf_axis, sizes):
    """Splits x along tf_axis into `sizes`: an IR Split when every part is used, else Crops."""
    outs = node.out_nodes()
    if sorted(outs) == list(range(len(sizes))):
        points = list(np.cumsum(sizes)[:-1])
        lw.keep_inputs(node, x)
        return lw.retype(node, IRSplit, {"axis": lw.ir_axis(x, tf_axis), "slice_point": [int(p) for p in points]})
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for port in outs:
        _crop_part(node, lw, x, tf_axis, starts[port], sizes[port], port)
    lw.graph.remove_node(node.id)


class Split(TFOp):
    """Split: (axis, value), num_split equal parts; SplitV: (value, size_splits, axis)."""
    tf_types = ("Split", "SplitV")

    @staticmethod
    def extract(node):
        expect_inputs(node, 2 if node.tf_op == "Split" else 3)
        node.tf["num"] = attr(node, "num_split", "i")

    @staticmethod
    def _parts(node, shape):
        if node.tf_op == "Split":
            axis = int(const_input(node, 0, "axis").ravel()[0])
        else:
            axis = int(const_input(node, 2, "axis").ravel()[0])
        axis = normalize_axis(node, axis, len(shape))
        n, dim = int(node.tf["num"]), int(shape[axis])
        if node.tf_op == "Split":
            if n <= 0 or dim % n:
                raise ShapeError("{}: cannot split {} values of axis {} into {} equal parts.", describe(node), dim,
                                 axis, n)
            return axis, [dim // n] * n
        sizes = [int(s) for s in const_input(node, 1, "size_splits").ravel()]
        if len(sizes) != n or sizes.count(-1) > 1:
            raise ShapeError("{}: size_splits {} for {} parts.", describe(node), sizes, n)
        if -1 in sizes:
            sizes[sizes.index(-1)] = dim - sum(s for s in sizes if s != -1)
        if sum(sizes) != dim or min(sizes) < 0:
            raise ShapeError("{}: size_splits {} do not add up to axis {} of size {}.", describe(node), sizes, axis,
                             dim)
        return axis, sizes

    @classmethod
    def _value(cls, node, items):
        return items[1] if node.tf_op == "Split" else items[0]

    @classmethod
    def evaluate(cls, node, values):
        x = cls._value(node, values)
        axis, sizes = cls._parts(node, x.shape)
        return np.split(x, np.cumsum(sizes)[:-1], axis=axis)

    @classmethod
    def shape(cls, node, shapes):
        x = cls._value(node, shapes)
        axis, sizes = cls._parts(node, x)
        result = []
        for s in sizes:
            part = np.array(x, dtype=np.int64)
            part[axis] = s
            result.append(part)
        return result

    @classmethod
    def lower(cls, node, lw):
        x = cls._value(node, node.data_inputs())
        axis, sizes = cls._parts(node, lw.tf_shape(x))
        _lower_parts(node, lw, x, axis, sizes)


class Unpack(TFOp):
    tf_types = ("Unpack",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)
        node.tf["num"] = attr(node, "num", "i")
        node.tf["axis"] = attr(node, "axis", "i", 0)

    @staticmethod
    def evaluate(node, values):
        x = values[0]
        axis = normalize_axis(node, node.tf["axis"], x.ndim)
        return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]

    @staticmethod
    def shape(node, shapes):
        x = [int(d) for d in shapes[0]]
        axis = normalize_axis(node, node.tf["axis"], len(x))
        if x[axis] != node.tf["num"]:
            raise ShapeError("{}: num {} but axis {} has {} values.", describe(node), node.tf["num"], axis, x[axis])
        return [x[:axis] + x[axis + 1:]] * x[axis]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        axis = normalize_axis(node, node.tf["axis"], lw.rank(x))
        for port in node.out_nodes():
            _crop_part(node, lw, x, axis, port, 1, port)
        lw.graph.remove_node(node.id)


# --- slices ---------------------------------------------------------------------------
def resolve_strided_slice(node, shape, begin, end, strides, masks):
    """TensorFlow's StridedSlice rules -> ([(begin, stride, size)] per input axis, output shape)."""
    begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_mask = masks
    rank = len(shape)
    k = len(begin)
    if not len(end) == len(strides) == k:
        raise ShapeError("{}: begin, end and strides have different lengths.", describe(node))
    consumes = sum(1 for i in range(k) if not (new_axis_mask >> i) & 1 and not (ellipsis_mask >> i) & 1)
    dims, out_shape, axis = [], [], 0
    for i in range(k):
        if (ellipsis_mask >> i) & 1:
            for _ in range(rank - consumes):
                dims.append((0, 1, int(shape[axis])))
                out_shape.append(int(shape[axis]))
                axis += 1
            continue
        if (new_axis_mask >> i) & 1:
            out_shape.append(1)
            continue
        if axis >= rank:
            raise ShapeError("{}: the slice has more axes than the {}-D input.", describe(node), rank)
        size, stride = int(shape[axis]), int(strides[i])
        if stride == 0:
            raise ShapeError("{}: stride 0.", describe(node))
        if (shrink_mask >> i) & 1:
            index = int(begin[i]) + (size if begin[i] < 0 else 0)
            if not 0 <= index < size:
                raise ShapeError("{}: index {} is out of axis {} of size {}.", describe(node), begin[i], axis, size)
            dims.append((index, 1, 1))
            axis += 1
            continue
        if stride > 0:
            b = 0 if (begin_mask >> i) & 1 else int(begin[i])
            e = size if (end_mask >> i) & 1 else int(end[i])
            b, e = (b + size if b < 0 else b), (e + size if e < 0 else e)
            b, e = min(max(b, 0), size), min(max(e, 0), size)
            n = max(0, -(-(e - b) // stride))
        else:
            b = size - 1 if (begin_mask >> i) & 1 else int(begin[i])
            e = -1 if (end_mask >> i) & 1 else int(end[i])
            b = b + size if b < 0 else b
            e = e + size if e < 0 and not (end_mask >> i) & 1 else e
            b, e = min(max(b, -1), size - 1), min(max(e, -1), size - 1)
            n = max(0, -(-(b - e) // -stride))
        dims.append((b, stride, n))
        out_shape.append(n)
        axis += 1
    while axis < rank:
        dims.append((0, 1, int(shape[axis])))
        out_shape.append(int(shape[axis]))
        axis += 1
    return dims, out_shape


def _slice_numpy(x, dims):
    index = []
    for b, s, n in dims:
        if n == 0:
            index.append(slice(0, 0))
            continue
        stop = b + n * s
        index.append(slice(b, stop if stop >= 0 else None, s))
    return x[tuple(index)]


def _lower_slice(node, lw, x, dims):
    """x sliced per input axis by dims [(begin, stride, size)] into the node's output,
    with a Reshape where the output shape differs (shrunk or new axes)."""
    shape = lw.tf_shape(x)
    out = node.out_node(0)
    if any(n == 0 for _, _, n in dims):
        raise lw.unsupported(node, "the slice is empty")
    sliced = np.array([n for _, _, n in dims], dtype=np.int64)
    lw.keep_inputs(node, x)
    if all(s == 1 for _, s, _ in dims):
        cut = [(a, b, int(shape[a]) - b - n) for a, (b, _, n) in enumerate(dims) if (b, n) != (0, shape[a])]
        if not cut:
            lw.retype(node, Identity)
        else:
            lw.retype(node, CropRange, {"axis": [lw.ir_axis(x, a) for a, _, _ in cut],
                                        "crop_begin": [int(b) for _, b, _ in cut],
                                        "crop_end": [int(e) for _, _, e in cut]})
    else:
        order = list(TO_NCHW) if lw.nchw(x) else list(range(len(dims)))
        lw.retype(node, IRStridedSlice, {"begin": [int(dims[a][0]) for a in order],
                                         "stride": [int(dims[a][1]) for a in order],
                                         "size": [int(dims[a][2]) for a in order]})
    if np.array_equal(sliced, lw.tf_shape(out)):
        return
    reshape = lw.insert_after(node, node.name + "/reshape", Reshape, {})
    mid = node.out_node(0)
    mid["tf_shape"], mid["nchw"] = sliced, lw.nchw(x)
    reshape_node(lw, reshape)


class StridedSlice(TFOp):
    tf_types = ("StridedSlice",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 4)
        node.tf["masks"] = tuple(attr(node, m, "i", 0) for m in (
            "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"))

    @staticmethod
    def _resolve(node, shape):
        begin, end, strides = (const_input(node, p, w).astype(np.int64).ravel()
                               for p, w in ((1, "begin"), (2, "end"), (3, "strides")))
        return resolve_strided_slice(node, shape, begin, end, strides, node.tf["masks"])

    @staticmethod
    def evaluate(node, values):
        dims, out_shape = StridedSlice._resolve(node, values[0].shape)
        return [_slice_numpy(values[0], dims).reshape(out_shape)]

    @staticmethod
    def shape(node, shapes):
        return [StridedSlice._resolve(node, shapes[0])[1]]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        _lower_slice(node, lw, x, StridedSlice._resolve(node, lw.tf_shape(x))[0])


class Slice(TFOp):
    """tf.slice: begin and size (-1: to the end) per axis."""
    tf_types = ("Slice",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 3)

    @staticmethod
    def _resolve(node, shape):
        begin = const_input(node, 1, "begin").astype(np.int64).ravel()
        size = const_input(node, 2, "size").astype(np.int64).ravel()
        if len(begin) != len(shape) or len(size) != len(shape):
            raise ShapeError("{}: begin {} and size {} must have one value per axis of {}.", describe(node),
                             list(begin), list(size), list(shape))
        dims = []
        for d, b, n in zip(shape, begin, size):
            n = d - b if n == -1 else n
            if b < 0 or n < 0 or b + n > d:
                raise ShapeError("{}: begin {} size {} do not fit {}.", describe(node), list(begin), list(size),
                                 list(shape))
            dims.append((int(b), 1, int(n)))
        return dims

    @staticmethod
    def evaluate(node, values):
        return [_slice_numpy(values[0], Slice._resolve(node, values[0].shape))]

    @staticmethod
    def shape(node, shapes):
        return [[n for _, _, n in Slice._resolve(node, shapes[0])]]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        _lower_slice(node, lw, x, Slice._resolve(node, lw.tf_shape(x)))


def _const_axes(node, port: int, rank: int) -> list[int]:
    axes = const_input(node, port, "axis").astype(np.int64).ravel()
    return [normalize_axis(node, int(a), rank) for a in axes]


def _reversed_axes(node, rank: int) -> list[int]:
    """The axes a ReverseV2 (their numbers) or a TF1 Reverse (a bool per axis) reverses."""
    if node.tf_op == "ReverseV2":
        return _const_axes(node, 1, rank)
    dims = const_input(node, 1, "dims").astype(bool).ravel()
    if len(dims) != rank:
        raise ShapeError("{}: {} dims flags for a {}-D tensor.", describe(node), len(dims), rank)
    return [int(a) for a in np.flatnonzero(dims)]


class Reverse(SameShapeOp):
    """tf.reverse (ReverseV2: the axes an input; TF1's Reverse: a bool per axis): our StridedSlice with stride -1
    on those axes."""
    tf_types = ("ReverseV2", "Reverse")

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def _dims(node, shape):
        axes = set(_reversed_axes(node, len(shape)))
        return [(int(d) - 1, -1, int(d)) if a in axes else (0, 1, int(d)) for a, d in enumerate(shape)]

    @staticmethod
    def evaluate(node, values):
        return [np.flip(values[0], axis=tuple(_reversed_axes(node, values[0].ndim)))]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        dims = Reverse._dims(node, lw.tf_shape(x))
        if all(s == 1 or n == 1 for _, s, n in dims):  # (reversing axes of size 1 moves nothing)
            lw.keep_inputs(node, x)
            return lw.retype(node, Identity)
        _lower_slice(node, lw, x, dims)


class Roll(SameShapeOp):
    """tf.roll (shift and axis constants; shifts of one axis add up): per rolled axis, the
    last `shift` entries then the others - two Crops and a Concat."""
    tf_types = ("Roll",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 3)

    @staticmethod
    def _shifts(node, shape) -> dict[int, int]:
        """{axis: shift in 1 .. size - 1} of the axes that move."""
        shifts = const_input(node, 1, "shift").astype(np.int64).ravel()
        axes = _const_axes(node, 2, len(shape))
        if len(shifts) != len(axes):
            raise ShapeError("{}: {} shifts for {} axes.", describe(node), len(shifts), len(axes))
        total: dict[int, int] = {}
        for shift, axis in zip(shifts, axes):
            total[axis] = total.get(axis, 0) + int(shift)
        return {a: t % int(shape[a]) for a, t in sorted(total.items()) if int(shape[a]) and t % int(shape[a])}

    @staticmethod
    def evaluate(node, values):
        shifts = Roll._shifts(node, values[0].shape)
        return [np.roll(values[0], list(shifts.values()), axis=list(shifts)) if shifts else values[0]]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        shape = lw.tf_shape(x)
        shifts = Roll._shifts(node, shape)
        if not shifts:
            lw.keep_inputs(node, x)
            return lw.retype(node, Identity)
        last = list(shifts)[-1]
        for axis, shift in shifts.items():
            size = int(shape[axis])
            parts = []
            for tag, begin, length in (("tail", size - shift, shift), ("head", 0, size - shift)):
                part_shape = shape.copy()
                part_shape[axis] = length
                parts.append(apply_op(lw, x, "{}/axis{}/{}".format(node.name, axis, tag), CropRange, {
                    "axis": [lw.ir_axis(x, axis)], "crop_begin": [begin], "crop_end": [size - begin - length]},
                    tf_shape=part_shape, nchw=lw.nchw(x)))
            if axis == last:
                lw.keep_inputs(node, *parts)
                return lw.retype(node, Concat, {"axis": lw.ir_axis(x, axis)})
            joined = lw.new_op("{}/axis{}".format(node.name, axis), Concat, {"axis": lw.ir_axis(x, axis)})
            for port, part in enumerate(parts):
                lw.graph.connect(part, joined, inp=port)
            x = lw.tensor_of(joined, "{}/axis{}".format(node.name, axis), shape, lw.nchw(x))
