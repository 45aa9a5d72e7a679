"""ROIPooling method=bilinear (TensorFlow's crop_and_resize: Faster R-CNN's second
stage) among the oneDNN steps, computed by our C kernel (native/roi_bilinear.c) on
channels-last tensors: the feature map is read in that layout (one reorder from the
convolution's blocked one, where an Export to numpy was before) and the crops are
written in it. On the numpy kernel's NCHW arrays the crop took 5x longer (each value
a gather across the row) and the pooling after it ran on a plain layout (Faster
R-CNN Inception v2: 2.2 + 1.1 ms).

The max pooling the OD API puts after the crop (kernel = stride, no padding) is
taken into the same C call (`absorbs`): each pooled value is the maximum of the
samples of its window, so the crops (9 MB on Faster R-CNN, written and read again)
never reach memory, and the result is the pair's.

oneDNN has no such primitive: the step's "primitive" is one C call per run, made
by NativeStep between the oneDNN primitives around it (CPU primitives run
synchronously: the map is written when it starts). The ROIs come from a numpy or C
layer (Proposal, DetectionOutput) and are read where they are."""
from __future__ import annotations

import numpy as np

from ..native import roi_bilinear
from .op import CHANNELS_LAST, NativeOp, Unsupported, need_native, register
from .primitives import Desc


@register("ROIPooling")
class CropAndResizeOp(NativeOp):
    step_backend = "native"
    pool = (1, 1)  # the max pooling taken in (kernel = stride), (1, 1): none

    def absorbs(self, step, in_shape, out_shape) -> bool:
        """Takes in the max pooling `step` that alone reads the crops (of in_shape)?"""
        k = step.kernel
        if step.layer.type != "Pooling" or k.method != "max":
            return False
        kernel, stride = tuple(k.kernel), tuple(k.stride)
        if kernel != stride or any(k.pad) or any(k.pad_end) or len(in_shape) != 4:
            return False
        if tuple(out_shape) != (*in_shape[:2], in_shape[2] // kernel[0], in_shape[3] // kernel[1]):
            return False
        self.pool = kernel
        return True

    def create(self, in_descs, in_shapes, out_shapes):
        k = self.kernel
        if k.method != "bilinear":
            raise Unsupported("max ROI pooling runs on numpy")
        if self.dt != "f32":
            raise Unsupported("the crop computes in f32")
        if len(in_shapes) != 2 or len(in_shapes[0]) != 4:
            raise Unsupported("a crop of other inputs than a 4-D map and ROIs")
        need_native(roi_bilinear)
        self.map_shape = tuple(in_shapes[0])
        self.out_shape = tuple(out_shapes[0])  # (pooled, when a pooling was taken in)
        feat = Desc.tagged(self.d, in_shapes[0], CHANNELS_LAST)
        return [feat, Desc.plain(self.d, in_shapes[1])], [Desc.tagged(self.d, out_shapes[0], CHANNELS_LAST)]

    def bind(self, ins, outs, scratch):
        return [_Crop(self, *ins, outs[0])]


class _Crop:
    """The crop as NativeStep runs a primitive: run(stream) on the bound memories."""

    def __init__(self, op: CropAndResizeOp, feat, rois, out):
        self.op, self.feat, self.rois, self.out = op, feat, rois, out

    def run(self, stream):
        op, k = self.op, self.op.kernel
        n, c, h, w = op.map_shape
        total, _, oh, ow = op.out_shape
        rois = np.frombuffer(self.rois.buffer, np.float32, count=total * 5).reshape(total, 5)
        count = k._real(rois)
        batch = rois[:count, 0].astype(np.int64)  # (toward zero, as the numpy kernel's int())
        bad = np.flatnonzero((batch < 0) | (batch >= n))
        if bad.size:
            k._batch_index(rois[bad[0], 0], n)  # raises the numpy kernel's error
        feat = np.frombuffer(self.feat.buffer, np.float32, count=n * h * w * c).reshape(n, h, w, c)
        out = np.frombuffer(self.out.buffer, np.float32, count=total * oh * ow * c).reshape(total, oh, ow, c)
        roi_bilinear.roi_bilinear_nhwc(feat, rois, count, batch, out, (k.pooled_h, k.pooled_w), op.pool)
