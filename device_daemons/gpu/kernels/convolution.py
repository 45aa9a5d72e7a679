"""Convolution and Deconvolution on the GPU (convolution.cl).

Variants chosen once per layer: depthwise (one input and one output channel per
group) on every device; then by the device's style (EngineContext.style):

* "simt" (GPUs: many scalar work items, neighbours read neighbouring pixels):
  the 1x1 fast path (1x1 kernel, no padding, any stride or group) and the direct
  kernel for the rest (any group, dilation, padding, stride), with weights packed
  once as [group][block of 8 output channels][in channel][ky][kx][8], zero-padded;
* "simd" (CPU OpenCL devices such as PoCL, which run a work group as a loop and
  need vectors inside a work item): a GEMM of the weights (their IR layout) with
  the input itself (1x1, stride 1, no padding) or with im2col columns in a
  scratch buffer of the request; weights packed once as [group][block of 4 output
  channels][k][4].
"""
from __future__ import annotations

import numpy as np

from .base import GpuKernel, i32, register, round_up

OCB = 8  # output channels per work item of the "simt" kernels (convolution.cl)
MR = 4   # output channels per work item of conv_gemm (16 pixels each)


def pack_blocks(weights: np.ndarray) -> tuple[np.ndarray, int]:
    """(G, OCg, ICg, KH, KW) -> [G][blocks][ICg][KH][KW][OCB] zero-padded; and blocks."""
    g, ocg, icg, kh, kw = weights.shape
    blocks = -(-ocg // OCB)
    padded = np.zeros((g, blocks * OCB, icg, kh, kw), np.float32)
    padded[:, :ocg] = weights
    packed = padded.reshape(g, blocks, OCB, icg, kh, kw).transpose(0, 1, 3, 4, 5, 2)
    return np.ascontiguousarray(packed), blocks


def pack_rows(weights: np.ndarray) -> tuple[np.ndarray, int]:
    """(G, M, K) -> [G][blocks][K][MR] zero-padded (conv_gemm's weights); and blocks."""
    g, m, k = weights.shape
    blocks = -(-m // MR)
    padded = np.zeros((g, blocks * MR, k), np.float32)
    padded[:, :m] = weights
    return np.ascontiguousarray(padded.reshape(g, blocks, MR, k).transpose(0, 1, 3, 2)), blocks


class _Windowed(GpuKernel):
    program = "convolution.cl"
    fuses_activation = True

    def _common_args(self):
        ref = self.ref
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = ref.kernel, ref.stride, ref.pad, ref.dilation
        return kh, kw, sh, sw, ph, pw, dh, dw

    def _bias(self):
        b = self.ref.blob("biases", required=False, size=self.ref.output)
        return (self.ctx.upload(b), 1) if b is not None else (self.ctx.dummy, 0)


@register("Convolution")
class Convolution(_Windowed):
    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        ref = self.ref
        g, o, icg = ref.group, ref.output, ref.in_per_group
        kh, kw = ref.kernel
        w = ref.weights.reshape(g, o // g, icg, kh, kw)
        self.direct_1x1 = (kh, kw) == (1, 1) and ref.pad == (0, 0) and ref.pad_end == (0, 0)
        if icg == 1 and o == g:
            self.variant = "conv_depthwise"
            self.weights = ctx.upload(w.reshape(o, kh * kw))
            self.blocks = 1
        elif ctx.style == "simd":
            self.variant = "conv_gemm"
            packed, self.blocks = pack_rows(w.reshape(g, o // g, -1))
            self.weights = ctx.upload(packed)
            self.direct_1x1 = self.direct_1x1 and ref.stride == (1, 1)
        else:
            self.variant = "conv_1x1" if self.direct_1x1 else "conv_direct"
            packed, self.blocks = pack_blocks(w)
            self.weights = ctx.upload(packed)
        self.bias, self.has_bias = self._bias()

    def scratch_bytes(self):
        """The im2col columns of the GEMM variant (all images)."""
        if self.variant != "conv_gemm" or self.direct_1x1:
            return []
        n, c = self.in_shapes[0][:2]
        _, _, oh, ow = self.out_shapes[0]
        kh, kw = self.ref.kernel
        return [n * c * kh * kw * oh * ow * self.ctx.dtype.itemsize]

    def launches(self, ins, outs, scratch=()):
        ref = self.ref
        n, c, h, w = self.in_shapes[0]
        _, o, oh, ow = self.out_shapes[0]
        g = ref.group
        kh, kw, sh, sw, ph, pw, dh, dw = self._common_args()
        tail = i32(self.has_bias) + self.act_args()
        if self.variant == "conv_gemm":
            result, columns = [], ins[0]
            if not self.direct_1x1:
                columns = scratch[0]
                args = [ins[0], columns] + i32(h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw)
                result.append(self.launch("im2col", args, (round_up(oh * ow, 8), kh * kw, n * c)))
            m, p = o // g, oh * ow
            args = [self.weights, columns, self.bias, outs[0]] + i32(m, p, (c // g) * kh * kw, g, self.blocks) + tail
            result.append(self.launch("conv_gemm", args, (-(-p // 16), self.blocks, n * g)))
            return result
        head = [ins[0], self.weights, self.bias, outs[0]]
        if self.variant == "conv_depthwise":
            args = head + i32(c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw) + tail
            return [self.launch("conv_depthwise", args, (round_up(ow, 8), oh, n * c))]
        shape = i32(c, h, w, o, oh, ow, g, c // g, o // g, self.blocks)
        if self.variant == "conv_1x1":
            args = head + shape + i32(sh, sw) + tail
            return [self.launch("conv_1x1", args, (round_up(oh * ow, 8), 1, n * g * self.blocks))]
        args = head + shape + i32(kh, kw, sh, sw, ph, pw, dh, dw) + tail
        return [self.launch("conv_direct", args, (round_up(ow, 8), oh, n * g * self.blocks))]


@register("Deconvolution")
class Deconvolution(_Windowed):
    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        ref = self.ref
        g, o, cin = ref.group, ref.output, ref.in_channels
        kh, kw = ref.kernel
        # Caffe's (C_in, C_out/g, kh, kw) -> (g, C_out/g, C_in/g, kh, kw)
        w = ref.blob("weights").reshape(g, cin // g, o // g, kh, kw).transpose(0, 2, 1, 3, 4)
        packed, self.blocks = pack_blocks(w)
        self.weights = ctx.upload(packed)
        self.bias, self.has_bias = self._bias()

    def launches(self, ins, outs):
        ref = self.ref
        n, c, h, w = self.in_shapes[0]
        _, o, oh, ow = self.out_shapes[0]
        g = ref.group
        args = [ins[0], self.weights, self.bias, outs[0]] + i32(c, h, w, o, oh, ow, g, c // g, o // g, self.blocks) \
            + i32(*self._common_args()) + i32(self.has_bias) + self.act_args()
        return [self.launch("deconv", args, (round_up(ow, 8), oh, n * g * self.blocks))]
