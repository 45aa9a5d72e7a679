"""Reductions: Mean, Sum, Max, Min (Prod, All, Any at conversion time only); Cumsum
(our CumSum layer along the IR's axis).

A Mean/Max over H and W of a 4-D tensor (over D, H and W of a 5-D one: a 3-D
pooling after a Permute to NCDHW) is a global Pooling (Sum: the average times
H*W, a Power after it), followed by a Reshape when the dims are not kept.
Other axes: our ReduceMean/ReduceSum/ReduceMax/ReduceMin layers; when the
reduced dims are dropped from an NCHW tensor, a Permute to NHWC first keeps
TensorFlow's order of the remaining axes.
"""
from __future__ import annotations

import numpy as np

from core.front.tf.lowering import TO_NCDHW, reshape_node
from core.front.tf.ops.base import TFOp, const_input, expect_inputs, normalize_axis
from core.front.tf.tensors import attr
from core.ops.activation import Power
from core.ops.pooling import Pooling
from core.ops.reduce import CumSum, ReduceMax, ReduceMean, ReduceMin, ReduceSum
from core.ops.shape_ops import Permute, Reshape
from ir.scan import cumsum

NUMPY = {"Mean": np.mean, "Sum": np.sum, "Max": np.max, "Min": np.min, "Prod": np.prod, "All": np.all,
         "Any": np.any}
IR = {"Mean": ReduceMean, "Sum": ReduceSum, "Max": ReduceMax, "Min": ReduceMin}


def reduced_axes(node, rank) -> list[int]:
    axes = const_input(node, 1, "reduction axes").astype(np.int64).ravel()
    return sorted({normalize_axis(node, a, rank) for a in axes})


class Reduce(TFOp):
    tf_types = tuple(NUMPY)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)
        node.tf["keep_dims"] = attr(node, "keep_dims", "b", False)

    @staticmethod
    def evaluate(node, values):
        x = values[0]
        axes = tuple(reduced_axes(node, x.ndim))
        y = NUMPY[node.tf_op](x, axis=axes, keepdims=node.tf["keep_dims"])
        return [np.asarray(y, dtype=x.dtype) if x.dtype.kind == "f" else np.asarray(y)]

    @staticmethod
    def shape(node, shapes):
        shape = [int(d) for d in shapes[0]]
        axes = reduced_axes(node, len(shape))
        if node.tf["keep_dims"]:
            return [[1 if i in axes else d for i, d in enumerate(shape)]]
        return [[d for i, d in enumerate(shape) if i not in axes]]

    @staticmethod
    def lower(node, lw):
        op = node.tf_op
        if op not in IR:
            raise lw.unsupported(node, "{} is only computed at conversion time, but here it reduces the model's "
                                       "data".format(op))
        x = node.data_inputs()[0]
        shape = lw.tf_shape(x)
        axes = reduced_axes(node, len(shape))
        keep = node.tf["keep_dims"]
        lw.keep_inputs(node, x)
        if (len(shape), axes) in ((4, [1, 2]), (5, [1, 2, 3])) and op in ("Mean", "Sum", "Max"):
            return _global_pooling(node, lw, op, shape, keep)
        if keep or not lw.nchw(x):
            return lw.retype(node, IR[op], {"axes": [lw.ir_axis(x, a) for a in axes], "keep_dims": keep})
        lw.retype(node, IR[op], {"axes": axes, "keep_dims": False})
        lw.tf_order_before(node, 0)


def _global_pooling(node, lw, op, shape, keep):
    spatial = [int(d) for d in shape[1:-1]]
    volume = len(spatial) == 3  # a 5-D tensor is NDHWC in the IR: a 3-D pooling reads it as NCDHW
    lw.retype(node, Pooling, {"kernel": np.array(spatial, np.int64), "stride": np.ones(len(spatial), np.int64),
                              "pad": np.zeros(len(spatial), np.int64), "rounding_type": "floor",
                              "pool-method": "max" if op == "Max" else "avg", "exclude-pad": False})
    if volume:
        lw.insert_before(node, 0, node.name + "/to_ncdhw", Permute, {"order": list(TO_NCDHW)})
        pooled = np.array([shape[0], shape[-1], 1, 1, 1], np.int64)
    else:
        pooled = np.array([shape[0], 1, 1, shape[3]], np.int64)
    name, last = node.name, node
    if op == "Sum":
        last = lw.insert_after(node, name + "/pool", Power, {"scale": float(np.prod(spatial))})
        node.out_node(0).attrs.update({"tf_shape": pooled, "nchw": not volume})
    if not keep or volume:  # (N, C, 1, 1, 1) -> TensorFlow's (N, 1, 1, 1, C): the same values in the same order
        reshape = lw.insert_after(last, name + "/keep_dims", Reshape, {})
        last.out_node(0).attrs.update({"tf_shape": pooled, "nchw": not volume})
        reshape_node(lw, reshape)


class Cumsum(TFOp):
    tf_types = ("Cumsum",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)
        node.tf["exclusive"] = attr(node, "exclusive", "b", False)
        node.tf["reverse"] = attr(node, "reverse", "b", False)

    @staticmethod
    def _axis(node, rank: int) -> int:
        return normalize_axis(node, const_input(node, 1, "axis").ravel()[0], rank)

    @classmethod
    def evaluate(cls, node, values):
        x = values[0]
        return [cumsum(x, cls._axis(node, x.ndim), node.tf["exclusive"], node.tf["reverse"])]

    @classmethod
    def shape(cls, node, shapes):
        cls._axis(node, len(shapes[0]))
        return [shapes[0]]

    @classmethod
    def lower(cls, node, lw):
        x = node.data_inputs()[0]
        axis = lw.ir_axis(x, cls._axis(node, lw.rank(x)))
        lw.keep_inputs(node, x)
        lw.retype(node, CumSum, {"axis": axis, "exclusive": node.tf["exclusive"], "reverse": node.tf["reverse"]})
