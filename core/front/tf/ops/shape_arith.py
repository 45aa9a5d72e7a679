"""Shape arithmetic, computed at conversion time: Shape, Size, Rank, Fill, Range,
ZerosLike, OnesLike, GatherV2 and MatrixBandPart (a causal mask). Shape/Size/Rank only need their input's shape, so
a Reshape fed by tf.shape(x) folds even though x is data. GatherV2 of a constant at indices the model's data holds
(an embedding lookup) is also a Gather layer, and of the model's data at constant indices Crops and a Concat."""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.ops.base import TFOp, ValueOnlyOp, const_input, expect_inputs, normalize_axis, set_values
from core.front.tf.ops.concat_split import gather_slices
from core.front.tf.tensors import attr, describe, numpy_dtype
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
