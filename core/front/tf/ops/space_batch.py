"""SpaceToBatchND and BatchToSpaceND: how TensorFlow writes an atrous (dilated)
convolution (SpaceToBatchND -> Conv2D -> BatchToSpaceND). That pattern becomes one
Convolution with dilation (core/front/tf/patterns.py); anywhere else the ops
reorder data between batch and space, which the IR cannot express. DepthToSpace and
SpaceToDepth (a pixel shuffle, YOLOv2's reorg) move data between the channels and
space: a Reshape to 6-D, a Permute and a Reshape back."""
from __future__ import annotations

import numpy as np

from core.errors import Error, ShapeError
from core.front.tf.lowering import apply_op, reshape_node, reshaped
from core.front.tf.ops.base import TFOp, const_input, expect_inputs
from core.front.tf.tensors import attr, describe
from core.ops.shape_ops import Permute


def block_and_pads(node, what, rank: int):
    """The block shape and paddings (crops) of a `rank`-D tensor: one value and pair per spatial
    axis, 2 of NHWC (H, W) or 1 of NWC (a dilated Conv1D's)."""
    block = const_input(node, 1, "block shape").astype(np.int64).ravel()
    pads = const_input(node, 2, what).astype(np.int64)
    m = rank - 2
    if m not in (1, 2) or block.shape != (m,) or pads.shape != (m, 2) or block.min() <= 0 or pads.min() < 0:
        raise ShapeError("{}: block shape {} and {} {} must be {} positive value(s) and pair(s), one per spatial "
                         "axis of its {}-D input (NHWC: H, W; NWC: W).", describe(node), block.tolist(), what,
                         pads.tolist(), max(m, 1), rank)
    return block, pads


class SpaceToBatch(TFOp):
    tf_types = ("SpaceToBatchND",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 3)

    @staticmethod
    def shape(node, shapes):
        x = np.asarray(shapes[0], np.int64)
        block, pads = block_and_pads(node, "paddings", len(x))
        padded = x[1:-1] + pads.sum(axis=1)
        if np.any(padded % block):
            raise ShapeError("{}: padded size {} is not a multiple of the block {}.", describe(node), list(padded),
                             list(block))
        return [[x[0] * block.prod(), *(padded // block), x[-1]]]

    @staticmethod
    def lower(node, lw):
        raise lw.unsupported(node, "SpaceToBatchND outside an atrous convolution (SpaceToBatchND -> Conv2D -> "
                                   "BatchToSpaceND) moves data into the batch")


class BatchToSpace(TFOp):
    tf_types = ("BatchToSpaceND",)

    @staticmethod
    def extract(node):
        expect_inputs(node, 3)

    @staticmethod
    def shape(node, shapes):
        x = np.asarray(shapes[0], np.int64)
        block, crops = block_and_pads(node, "crops", len(x))
        if x[0] % block.prod():
            raise ShapeError("{}: batch {} is not a multiple of the block {}.", describe(node), x[0], list(block))
        size = x[1:-1] * block - crops.sum(axis=1)
        return [[x[0] // block.prod(), *size, x[-1]]]

    @staticmethod
    def lower(node, lw):
        raise lw.unsupported(node, "BatchToSpaceND outside an atrous convolution moves data out of the batch")


class DepthSpace(TFOp):
    """DepthToSpace(b): [N, H, W, b*b*C] -> [N, H*b, W*b, C], channel block (i, j) to pixel (i, j) of each b x b
    block (TensorFlow's DCR order); SpaceToDepth(b) the inverse. Both are [N, H, b, W, b, C] <-> [N, H, W, b, b, C]
    with axes 2 and 3 swapped."""
    tf_types = ("DepthToSpace", "SpaceToDepth")
    SWAP = [0, 1, 3, 2, 4, 5]

    @staticmethod
    def extract(node):
        expect_inputs(node, 1)
        node.tf["block"] = int(attr(node, "block_size", "i"))
        if attr(node, "data_format", "s", "NHWC") != "NHWC":
            raise Error("{}: only NHWC data (data_format NHWC) is supported.", describe(node))
        if node.tf["block"] < 2:
            raise ShapeError("{}: block_size {} must be at least 2.", describe(node), node.tf["block"])

    @classmethod
    def _six(cls, node, shape):
        """(the 6-D shape before the swap, after it, the output shape)."""
        n, h, w, c = (int(d) for d in shape)
        b = node.tf["block"]
        if node.tf_op == "DepthToSpace":
            if c % (b * b):
                raise ShapeError("{}: {} channels are not a multiple of block_size {} squared.", describe(node), c, b)
            return [n, h, w, b, b, c // (b * b)], [n, h, b, w, b, c // (b * b)], [n, h * b, w * b, c // (b * b)]
        if h % b or w % b:
            raise ShapeError("{}: height {} and width {} must be multiples of block_size {}.", describe(node), h, w, b)
        return [n, h // b, b, w // b, b, c], [n, h // b, w // b, b, b, c], [n, h // b, w // b, b * b * c]

    @classmethod
    def evaluate(cls, node, values):
        before, _, out = cls._six(node, values[0].shape)
        return [np.transpose(values[0].reshape(before), cls.SWAP).reshape(out)]

    @classmethod
    def shape(cls, node, shapes):
        if len(shapes[0]) != 4:
            raise ShapeError("{}: {} takes a 4-D (NHWC) input, got {}.", describe(node), node.tf_op, list(shapes[0]))
        return [cls._six(node, shapes[0])[2]]

    @classmethod
    def lower(cls, node, lw):
        x = node.data_inputs()[0]
        before, after, _ = cls._six(node, lw.tf_shape(x))
        six = reshaped(lw, x, before, False, node.name + "/blocks")
        lw.keep_inputs(node, apply_op(lw, six, node.name + "/swap", Permute, {"order": cls.SWAP}, after))
        reshape_node(lw, node)
