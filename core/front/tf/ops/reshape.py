"""Layout ops: Reshape, Squeeze, ExpandDims (IR Reshape keeping TensorFlow's element
order: core/front/tf/lowering.py puts Permutes around it where a 4-D side is
NCHW), Transpose (Permute, its order mapped to the IR layouts), Tile (one IR
Tile per repeated axis), BroadcastTo (a Reshape to its rank where needed, then Tiles)."""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.lowering import IR_AXIS4, TO_NCHW, apply_op, broadcast_to, reshape_node
from core.front.tf.ops.base import TFOp, const_input, expect_inputs, normalize_axis
from core.front.tf.tensors import attr, describe
from core.ops.identity import Identity
from core.ops.shape_ops import Permute, Tile as IRTile


def resolve_shape(node, in_shape, target) -> list[int]:
    """TensorFlow's Reshape rule: one -1 takes what is left."""
    target = [int(d) for d in np.asarray(target).ravel()]
    total = int(np.prod(in_shape))
    if target.count(-1) > 1 or any(d < -1 for d in target):
        raise ShapeError("{}: the new shape {} is not valid (at most one -1).", describe(node), target)
    if -1 in target:
        known = int(np.prod([d for d in target if d != -1]))
        if known == 0 or total % known:
            raise ShapeError("{}: cannot reshape {} into {}.", describe(node), list(in_shape), target)
        target[target.index(-1)] = total // known
    if int(np.prod(target)) != total:
        raise ShapeError("{}: cannot reshape {} ({} values) into {}.", describe(node), list(in_shape), total, target)
    return target


class Reshape(TFOp):
    tf_types = ("Reshape",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def evaluate(node, values):
        return [values[0].reshape(resolve_shape(node, values[0].shape, values[1]))]

    @staticmethod
    def shape(node, shapes):
        return [resolve_shape(node, shapes[0], const_input(node, 1, "new shape"))]

    @staticmethod
    def lower(node, lw):
        reshape_node(lw, node)


def squeezed(node, shape):
    dims = node.tf["squeeze_dims"]
    rank = len(shape)
    if not dims:
        return [int(d) for d in shape if d != 1]
    axes = {normalize_axis(node, a, rank) for a in dims}
    for a in axes:
        if shape[a] != 1:
            raise ShapeError("{}: cannot squeeze axis {} of size {} (shape {}).", describe(node), a, shape[a],
                             list(shape))
    return [int(d) for i, d in enumerate(shape) if i not in axes]


class Squeeze(TFOp):
    tf_types = ("Squeeze",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)
        node.tf["squeeze_dims"] = attr(node, "squeeze_dims", "list_i", [])

    @staticmethod
    def evaluate(node, values):
        return [values[0].reshape(squeezed(node, values[0].shape))]

    @staticmethod
    def shape(node, shapes):
        return [squeezed(node, shapes[0])]

    @staticmethod
    def lower(node, lw):
        reshape_node(lw, node)


def expanded(node, shape):
    axis = int(const_input(node, 1, "axis").ravel()[0])
    axis = normalize_axis(node, axis, len(shape) + 1)
    shape = [int(d) for d in shape]
    return shape[:axis] + [1] + shape[axis:]


class ExpandDims(TFOp):
    tf_types = ("ExpandDims",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def evaluate(node, values):
        return [values[0].reshape(expanded(node, values[0].shape))]

    @staticmethod
    def shape(node, shapes):
        return [expanded(node, shapes[0])]

    @staticmethod
    def lower(node, lw):
        reshape_node(lw, node)


def permutation(node, rank):
    perm = [int(p) for p in const_input(node, 1, "permutation").ravel()]
    perm = [p + rank if p < 0 else p for p in perm]
    if sorted(perm) != list(range(rank)):
        raise ShapeError("{}: {} is not a permutation of {} axes.", describe(node), perm, rank)
    return perm


class Transpose(TFOp):
    tf_types = ("Transpose",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def evaluate(node, values):
        return [np.transpose(values[0], permutation(node, values[0].ndim))]

    @staticmethod
    def shape(node, shapes):
        perm = permutation(node, len(shapes[0]))
        return [[shapes[0][p] for p in perm]]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        perm = permutation(node, lw.rank(x))
        if lw.nchw(x):
            # ir_out[i] = tf_out[TO_NCHW[i]] = tf_in[perm[TO_NCHW[i]]] = ir_in[IR_AXIS4[perm[TO_NCHW[i]]]]
            perm = [IR_AXIS4[perm[TO_NCHW[i]]] for i in range(4)]
        lw.keep_inputs(node, x)
        lw.retype(node, Permute, {"order": perm})


class Tile(TFOp):
    tf_types = ("Tile",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def _multiples(node, rank):
        mult = [int(m) for m in const_input(node, 1, "multiples").ravel()]
        if len(mult) != rank or min(mult, default=1) < 1:
            raise ShapeError("{}: multiples {} do not fit a {}-D input.", describe(node), mult, rank)
        return mult

    @staticmethod
    def evaluate(node, values):
        return [np.tile(values[0], Tile._multiples(node, values[0].ndim))]

    @staticmethod
    def shape(node, shapes):
        mult = Tile._multiples(node, len(shapes[0]))
        return [[int(d) * m for d, m in zip(shapes[0], mult)]]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        mult = Tile._multiples(node, lw.rank(x))
        axes = [(lw.ir_axis(x, a), m) for a, m in enumerate(mult) if m > 1]
        lw.keep_inputs(node, x)
        if not axes:
            return lw.retype(node, Identity)
        # one IR Tile per axis; the node itself is the last of them
        for axis, m in axes[:-1]:
            x = apply_op(lw, x, "{}/tile{}".format(node.name, axis), IRTile, {"axis": axis, "tiles": m})
        lw.keep_inputs(node, x)
        lw.retype(node, IRTile, {"axis": axes[-1][0], "tiles": axes[-1][1]})


class BroadcastTo(TFOp):
    """tf.broadcast_to: numpy's rules, to a constant shape."""
    tf_types = ("BroadcastTo",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 2)

    @staticmethod
    def _target(node, shape) -> list[int]:
        target = [int(d) for d in const_input(node, 1, "shape").ravel()]
        try:
            ok = list(np.broadcast_shapes(tuple(int(d) for d in shape), tuple(target))) == target
        except ValueError:
            ok = False
        if not ok:
            raise ShapeError("{}: cannot broadcast {} to {}.", describe(node), [int(d) for d in shape], target)
        return target

    @staticmethod
    def evaluate(node, values):
        return [np.array(np.broadcast_to(values[0], BroadcastTo._target(node, values[0].shape)))]

    @staticmethod
    def shape(node, shapes):
        return [BroadcastTo._target(node, shapes[0])]

    @staticmethod
    def lower(node, lw):
        x = node.data_inputs()[0]
        target = lw.tf_shape(node.out_node(0))
        full = x if np.array_equal(lw.tf_shape(x), target) else broadcast_to(lw, x, target, node.name)
        lw.keep_inputs(node, full)
        lw.retype(node, Identity)
