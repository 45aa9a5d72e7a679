"""SpaceToBatchND and BatchToSpaceND: how TensorFlow writes an atrous (dilated)
convolution (SpaceToBatchND -> Conv2D -> BatchToSpaceND). That pattern becomes one
Convolution with dilation (core/front/tf/patterns.py); anywhere else the ops
reorder data between batch and space, which the IR cannot express."""
from __future__ import annotations

import numpy as np

from core.errors import ShapeError
from core.front.tf.ops.base import TFOp, const_input, expect_inputs
from core.front.tf.tensors import describe


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
