"""Shape arithmetic, computed at conversion time: Shape, ShapeN, Size, Rank, Fill, Range, LinSpace,
InvertPermutation, BroadcastArgs, ZerosLike, OnesLike, GatherV2 and MatrixBandPart (a causal mask). Shape/Size/Rank
only need their input's shape, so a Reshape fed by tf.shape(x) folds even though x is data. GatherV2 of a constant at
indices the model's data holds (an embedding lookup) is also a Gather layer, and of the model's data at constant indices
Crops and a Concat. OneHot of the model's data is an Eltwise equal with the positions along its new axis; GatherNd a
Gather along the params' flattened leading axes."""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.lowering import apply_op, reshaped
from core.front.tf.ops.base import TFOp, ValueOnlyOp, const_input, expect_inputs, normalize_axis, set_values
from core.front.tf.ops.concat_split import gather_slices
from core.front.tf.ops.elementwise import eltwise_with_const
from core.front.tf.tensors import attr, describe, numpy_dtype
from core.ops.activation import Power
from core.ops.linear import Eltwise
from core.ops.reduce import ReduceSum
from core.ops.shape_ops import Gather as GatherLayer
from ir.gather import gather_shape, take


def _out_dtype(node, name="out_type", default=np.int32):
    if name not in node.pb.attr:
        return default
    return numpy_dtype(attr(node, name, "type"), describe(node))


class ShapeOf(ValueOnlyOp):
    tf_types = ("Shape", "Size", "Rank")

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)
        node.tf["dtype"] = _out_dtype(node)

    @staticmethod
    def infer(node):
        shape = np.asarray(node.in_node(0).shape, dtype=np.int64)
        value = {"Shape": shape, "Size": np.int64(np.prod(shape)), "Rank": np.int64(len(shape))}[node.tf_op]
        set_values(node, [np.asarray(value).astype(node.tf["dtype"] if node.tf_op != "Rank" else np.int32)])


class ShapeN(ValueOnlyOp):
    """The shapes of N tensors (TF1 graphs feed Conv2DBackpropInput's input_sizes with it)."""
    tf_types = ("ShapeN",)

    @staticmethod
    def extract(node):
        expect_inputs(node, (1, 1 << 20))
        node.tf["dtype"] = _out_dtype(node)

    @staticmethod
    def infer(node):
        set_values(node, [np.asarray(d.shape, dtype=node.tf["dtype"]) for d in node.data_inputs()])


class LikeOf(ValueOnlyOp):
    tf_types = ("ZerosLike", "OnesLike")

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)

    @staticmethod
    def infer(node):
        x = node.in_node(0)
        dtype = np.asarray(x.value).dtype if x.soft_get("value") is not None else np.float32
        fill = 0 if node.tf_op == "ZerosLike" else 1
        set_values(node, [np.full(tuple(int(d) for d in x.shape), fill, dtype=dtype)])


class Fill(ValueOnlyOp):
    tf_types = ("Fill",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def evaluate(node, values):
        dims = [int(d) for d in values[0].ravel()]
        if any(d < 0 for d in dims) or np.prod(dims) > 1 << 28:
            raise ShapeError("{}: cannot fill a tensor of shape {}.", describe(node), dims)
        return [np.full(dims, values[1].ravel()[0], dtype=values[1].dtype)]


class Range(ValueOnlyOp):
    tf_types = ("Range",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 3)

    @staticmethod
    def evaluate(node, values):
        start, limit, delta = (v.ravel()[0] for v in values)
        if delta == 0 or abs((limit - start) / delta) > 1 << 28:
            raise ShapeError("{}: range({}, {}, {}) is not a valid range.", describe(node), start, limit, delta)
        return [np.arange(start, limit, delta, dtype=values[0].dtype)]


class LinSpace(ValueOnlyOp):
    tf_types = ("LinSpace",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 3)

    @staticmethod
    def evaluate(node, values):
        start, stop, num = values[0].ravel()[0], values[1].ravel()[0], int(values[2].ravel()[0])
        if not 0 < num <= 1 << 28:
            raise ShapeError("{}: linspace of {} values.", describe(node), num)
        return [np.linspace(start, stop, num, dtype=values[0].dtype)]


class InvertPermutation(ValueOnlyOp):
    tf_types = ("InvertPermutation",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)

    @staticmethod
    def evaluate(node, values):
        perm = values[0].ravel()
        if sorted(perm.tolist()) != list(range(perm.size)):
            raise ShapeError("{}: {} is not a permutation.", describe(node), perm.tolist())
        return [np.argsort(perm).astype(values[0].dtype)]


class BroadcastArgs(ValueOnlyOp):
    """The shape two shapes broadcast to (tf.broadcast_dynamic_shape)."""
    tf_types = ("BroadcastArgs",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def evaluate(node, values):
        try:
            shape = np.broadcast_shapes(*(tuple(int(d) for d in v.ravel()) for v in values))
        except ValueError:
            raise ShapeError("{}: shapes {} and {} do not broadcast.", describe(node), values[0].tolist(),
                             values[1].tolist()) from None
        return [np.asarray(shape, dtype=values[0].dtype)]


def _gather_axis(node, params_rank: int) -> int:
    axis = int(const_input(node, 2, "axis").ravel()[0]) if node.tf_op == "GatherV2" else 0
    return normalize_axis(node, axis, params_rank)


def _batch_dims(node, indices_rank: int, axis: int) -> int:
    """TensorFlow's batch_dims (negative: from the indices' rank), at most the axis."""
    b = node.tf["batch_dims"]
    b = b + indices_rank if b < 0 else b
    if not 0 <= b <= min(axis, indices_rank):
        raise ShapeError("{}: batch_dims {} must be within the indices' rank {} and at most the axis {}.",
                         describe(node), node.tf["batch_dims"], indices_rank, axis)
    return b


def _check_indices(node, indices, size: int, axis: int) -> None:
    """Constant indices in [0, size), as TensorFlow's Gather has them (it fails on any other, negative ones too)."""
    if indices.size and (indices.min() < 0 or indices.max() >= size):
        raise ShapeError("{}: indices {} out of [0, {}) (axis {}): TensorFlow's Gather fails on them too.",
                         describe(node), indices.ravel().tolist()[:20], size, axis)


class Gather(TFOp):
    """GatherV2 / Gather: computed at conversion time when every input is constant; a constant dictionary (an
    embedding table) gathered at indices the model's data holds is a Gather layer (the table its blob); the model's
    data gathered at constant indices is Crops and a Concat (gather_slices); the data gathered at indices the data
    holds, or with batch_dims, is a Gather layer with the dictionary its second input (none of the three 4-D: NCHW
    in the IR)."""
    tf_types = ("GatherV2", "Gather")

    @staticmethod
    def extract(node):
        expect_inputs(node, 3 if node.tf_op == "GatherV2" else 2)
        node.tf["batch_dims"] = attr(node, "batch_dims", "i", 0)

    @staticmethod
    def evaluate(node, values):
        params, indices = values[0], values[1].astype(np.int64)
        axis = _gather_axis(node, params.ndim)
        _check_indices(node, indices, params.shape[axis], axis)
        return [take(params, indices, axis, _batch_dims(node, indices.ndim, axis))]

    @staticmethod
    def shape(node, shapes):
        params = [int(d) for d in shapes[0]]
        axis = _gather_axis(node, len(params))
        batch_dims = _batch_dims(node, len(shapes[1]), axis)
        if [int(d) for d in shapes[1][:batch_dims]] != params[:batch_dims]:
            raise ShapeError("{}: with batch_dims {} the first dims of the indices {} and of the params {} must be "
                             "equal.", describe(node), batch_dims, [int(d) for d in shapes[1]], params)
        indices = node.in_node(1).soft_get("value")
        if indices is not None:
            _check_indices(node, np.asarray(indices).astype(np.int64), params[axis], axis)
        return [gather_shape(params, axis, shapes[1], batch_dims)]

    @staticmethod
    def lower(node, lw):
        params = node.in_node(0).soft_get("value")
        indices = node.in_node(1)
        axis = _gather_axis(node, len(lw.tf_shape(node.in_node(0))))
        batch_dims = _batch_dims(node, len(lw.tf_shape(indices)), axis)
        constant = indices.soft_get("value")
        if params is None and constant is not None and not batch_dims:
            return gather_slices(node, lw, node.in_node(0), axis, np.asarray(constant))
        tensors = [("indices", indices), ("result", node.out_node(0))]
        if params is None:
            tensors.insert(0, ("dictionary", node.in_node(0)))
        four_d = [what for what, d in tensors if len(lw.tf_shape(d)) == 4]
        if four_d:
            what = four_d[0] if len(four_d) == 1 else ", ".join(four_d[:-1]) + " and " + four_d[-1]
            raise lw.unsupported(node, "a Gather whose {} {} 4-D (NCHW in the IR)".format(
                what, "is" if len(four_d) == 1 else "are"))
        if params is None:  # the model's data (at indices the data holds, or in batches): the dictionary is input 1
            if constant is not None:  # (batches at constant indices: a Const layer holds them)
                indices = lw.graph.add_const(node.name + "/indices", np.asarray(constant, np.float32))
                indices["tf_shape"], indices["nchw"] = np.array(np.shape(constant), np.int64), False
            lw.keep_inputs(node, indices, node.in_node(0))
            return lw.retype(node, GatherLayer, {"axis": axis, "batch_dims": batch_dims})
        if params.dtype.kind != "f":
            raise lw.unsupported(node, "a Gather of a {} constant by the model's data (the IR computes in floating "
                                       "point)".format(params.dtype.name))
        lw.keep_inputs(node, indices)
        lw.retype(node, GatherLayer, {"axis": axis, "dims": [int(d) for d in params.shape], "batch_dims": batch_dims})
        lw.add_blob(node, "weights", params)


class MatrixBandPart(ValueOnlyOp):
    """The band of the last two axes of a constant (tf.linalg.band_part: Keras' causal mask)."""
    tf_types = ("MatrixBandPart",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 3)

    @staticmethod
    def evaluate(node, values):
        x, lower, upper = values[0], int(values[1].ravel()[0]), int(values[2].ravel()[0])
        if x.ndim < 2:
            raise ShapeError("{}: band_part needs at least 2 axes, got {}.", describe(node), list(x.shape))
        rows, cols = np.indices(x.shape[-2:])
        keep = ((lower < 0) | (rows - cols <= lower)) & ((upper < 0) | (cols - rows <= upper))
        return [np.where(keep, x, np.zeros_like(x))]


class OneHot(TFOp):
    """tf.one_hot (depth, on and off values constants): on_value where the index equals its position along
    the new axis, else off_value (an index outside 0 .. depth - 1 gives a row of off_value). On the model's data:
    the indices with the new axis as one (a Reshape), an Eltwise equal with 0 .. depth - 1 along it (both
    broadcast), then a Power that makes 1.0 / 0.0 on / off where they are not."""
    tf_types = ("OneHot",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 4)
        node.tf["axis"] = attr(node, "axis", "i", -1)

    @staticmethod
    def _params(node, rank: int):
        depth = int(const_input(node, 1, "depth").ravel()[0])
        if depth < 0:
            raise ShapeError("{}: depth {} is negative.", describe(node), depth)
        on, off = (float(const_input(node, p, w).ravel()[0]) for p, w in ((2, "on_value"), (3, "off_value")))
        axis = node.tf["axis"]
        if not -1 <= axis <= rank:
            raise ShapeError("{}: axis {} is out of range for {}-D indices.", describe(node), axis, rank)
        return depth, on, off, rank if axis == -1 else axis

    @staticmethod
    def evaluate(node, values):
        indices = values[0]
        depth, _, _, axis = OneHot._params(node, indices.ndim)
        hot = np.expand_dims(indices, axis) == np.arange(depth).reshape([-1] + [1] * (indices.ndim - axis))
        return [np.where(hot, values[2], values[3]).astype(values[2].dtype)]

    @staticmethod
    def shape(node, shapes):
        shape = [int(d) for d in shapes[0]]
        depth, _, _, axis = OneHot._params(node, len(shape))
        return [shape[:axis] + [depth] + shape[axis:]]

    @staticmethod
    def lower(node, lw):
        indices = node.data_inputs()[0]
        shape = [int(d) for d in lw.tf_shape(indices)]
        depth, on, off, axis = OneHot._params(node, len(shape))
        if depth == 0:
            raise lw.unsupported(node, "depth is 0 (an empty result)")
        column = shape[:axis] + [1] + shape[axis:]
        x = reshaped(lw, indices, column, len(column) == 4, node.name + "/indices")
        positions = np.arange(depth, dtype=np.float32).reshape([-1] + [1] * (len(shape) - axis))
        eltwise_with_const(node, lw, x, positions, "equal")
        if (on, off) != (1.0, 0.0):
            lw.insert_after(node, node.name + "/values", Power, {"power": 1.0, "scale": on - off, "shift": off})


class GatherNd(TFOp):
    """tf.gather_nd: the entries of the params at the index tuples along the indices' last axis (m values each:
    the params' first m axes). As a Gather along axis 0 of the params with their first m axes flattened, at the flat
    index sum(index_k * stride_k): folded for constant indices (then the data's Crops and a Concat, gather_slices),
    else an Eltwise mul by the strides, a ReduceSum over the tuple and a Gather layer with the dictionary its second
    input (none of the tensors 4-D: NCHW in the IR)."""
    tf_types = ("GatherNd",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def _depth(node, params_shape, indices_shape) -> int:
        if not len(indices_shape) or int(indices_shape[-1]) > len(params_shape):
            raise ShapeError("{}: index tuples of {} values do not fit params of shape {}.", describe(node),
                             int(indices_shape[-1]) if len(indices_shape) else 0, [int(d) for d in params_shape])
        return int(indices_shape[-1])

    @staticmethod
    def _flat_indices(node, params_shape, indices) -> np.ndarray:
        """Constant index tuples checked against the params (TensorFlow's CPU kernel fails on others) and flattened."""
        m = GatherNd._depth(node, params_shape, indices.shape)
        bounds = np.array([int(d) for d in params_shape[:m]], np.int64)
        if indices.size and ((indices < 0).any() or (indices >= bounds).any()):
            raise ShapeError("{}: index tuples {} out of the params' first {} axes {}.", describe(node),
                             indices.reshape(-1, m).tolist()[:8], m, bounds.tolist())
        return (indices.astype(np.int64) * _strides(bounds)).sum(-1)

    @staticmethod
    def evaluate(node, values):
        params, indices = values
        flat = GatherNd._flat_indices(node, params.shape, indices)
        m = indices.shape[-1]
        return [params.reshape((-1,) + params.shape[m:])[flat]]

    @staticmethod
    def shape(node, shapes):
        params, indices = ([int(d) for d in s] for s in shapes)
        m = GatherNd._depth(node, params, indices)
        return [indices[:-1] + params[m:]]

    @staticmethod
    def lower(node, lw):
        params, indices = node.in_node(0), node.in_node(1)
        p_shape, i_shape = ([int(d) for d in lw.tf_shape(d)] for d in (params, indices))
        m = GatherNd._depth(node, p_shape, i_shape)
        flat_shape = [int(np.prod(p_shape[:m]))] + p_shape[m:]
        four_d = [what for what, shape in (("params", p_shape), ("indices", i_shape), ("result", flat_shape),
                                           ("result", lw.tf_shape(node.out_node(0)))) if len(shape) == 4]
        if four_d:
            raise lw.unsupported(node, "a GatherNd whose {} is 4-D (NCHW in the IR)".format(four_d[0]))
        constant = indices.soft_get("value")
        if params.soft_get("value") is not None:
            if constant is None and np.asarray(params.value).dtype.kind != "f":
                raise lw.unsupported(node, "a GatherNd of a {} constant by the model's data (the IR computes in "
                                           "floating point)".format(np.asarray(params.value).dtype.name))
            flat = lw.graph.add_const(node.name + "/params", np.asarray(params.value, np.float32).reshape(flat_shape))
            flat["tf_shape"], flat["nchw"] = np.array(flat_shape, np.int64), False
        else:
            flat = params if flat_shape == p_shape else reshaped(lw, params, flat_shape, False, node.name + "/params")
        if constant is not None:
            return gather_slices(node, lw, flat, 0, GatherNd._flat_indices(node, p_shape, np.asarray(constant)))
        where = indices
        if m > 1:  # sum(index_k * stride_k) over the tuple's axis
            strides = lw.graph.add_const(node.name + "/strides", np.broadcast_to(
                _strides(np.array(p_shape[:m])).astype(np.float32), i_shape).copy())
            strides["tf_shape"], strides["nchw"] = np.array(i_shape, np.int64), False
            scaled = lw.new_op(node.name + "/scaled", Eltwise, {"operation": "mul"})
            lw.graph.connect(indices, scaled, inp=0)
            lw.graph.connect(strides, scaled, inp=1)
            where = apply_op(lw, lw.tensor_of(scaled, node.name + "/scaled", i_shape), node.name + "/flat",
                             ReduceSum, {"axes": [len(i_shape) - 1], "keep_dims": False}, tf_shape=i_shape[:-1])
        else:
            where = reshaped(lw, indices, i_shape[:-1], False, node.name + "/flat")
        lw.keep_inputs(node, where, flat)
        lw.retype(node, GatherLayer, {"axis": 0, "batch_dims": 0})


def _strides(dims) -> np.ndarray:
    """Row-major strides of an array of shape `dims` (in elements)."""
    return np.append(np.cumprod(np.asarray(dims[1:], np.int64)[::-1])[::-1], 1).astype(np.int64)
