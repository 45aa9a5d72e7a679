"""Convolution on oneDNN (grouped and depthwise too): the layouts of weights and
destination left to the library ("any": blocked, e.g. nChw16c on AVX-512), the source
read in the layout its producer left it where the library has a fast kernel for that
(no reorder between two oneDNN layers), else in the one it picks; bias and activations
fused, and an Eltwise sum that reads it (the result added into the other input's
tensor). bf16: activations and weights bf16, bias f32, accumulation f32.

A bf16 depthwise convolution with a bias on a CPU with AMX adds its bias as a binary
post-op instead: oneDNN 3.2's brgemm depthwise kernel (brdgmm_dw) takes no f32 bias
beside a bf16 destination, and without it the library falls back to jit_dw, which
took 405 us against brdgmm's 328 on MobileNetV2's nine depthwise shapes here (AMX;
the bias still added in f32). Where AMX is off (ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16)
brdgmm was the slower (466 against 422 us), so there the library's choice stands."""
from __future__ import annotations

import numpy as np

from .library import DnnlError
from .op import NativeOp, Unsupported, constant, register
from .primitives import LAYOUT_TAGS, Desc, conv_pd


def _fast(implementation: str) -> bool:
    """oneDNN's direct and brgemm kernels (jit*, brg*, brdgmm*), not its gemm-based or reference ones:
    worth reading a layout for instead of reordering into the one it prefers."""
    return implementation.startswith(("jit", "brg", "brdgmm")) and "gemm:" not in implementation


def isa_rank(implementation: str) -> int:
    """How wide the instructions of a oneDNN implementation are ("jit:avx2" -> 2,
    "brgconv:avx512_core" -> 3, AMX 4; 0: none named)."""
    isa = implementation.rpartition(":")[2]
    if "amx" in isa:
        return 4
    if isa.startswith("avx512"):
        return 3
    if isa.startswith("avx"):
        return 2
    return 1 if isa.startswith("sse") else 0


def _worth_following(implementation: str, preferred: str) -> bool:
    """Read the producer's layout with this kernel rather than reorder into the preferred one?
    Only a fast kernel of the preferred one's instruction width: an 8-channel-blocked tensor
    (a layer of 24 channels) has AVX2 kernels only, and following it would keep every layer
    after it on them (the OD API's Faster R-CNN: its whole first stage at half the width)."""
    return _fast(implementation) and isa_rank(implementation) >= isa_rank(preferred)


@register("Convolution")
class ConvolutionOp(NativeOp):
    accepts_post_ops = True
    accepts_sum = True
    bias_post_op = False  # the bias added by a binary post-op, not the primitive's bias (module doc)

    def create(self, in_descs, in_shapes, out_shapes):
        k, d = self.kernel, self.d
        c, out = in_shapes[0][1], out_shapes[0]
        self.out_dims = out
        g = k.group
        if g == 1:
            self.w_dims = (k.output, c, *k.kernel)
        else:
            self.w_dims = (g, k.output // g, c // g, *k.kernel)
        self.has_bias = k.bias is not None
        self.bias_post_op = False  # (create may run again: in f32 after bf16, without a sum after with one)
        given = in_descs[0]
        pd = self._pd(Desc.any(d, in_shapes[0], self.dt), None, required=True)
        if not _fast(pd.implementation):
            pd = self._fast_layout(in_shapes[0], out) or pd
        if given is not None and given.dt == self.dt and not pd.md("src_md", dims=in_shapes[0]).same_bytes(given):
            # the producer's layout instead, where oneDNN has a fast kernel for it (no reorder); the
            # destination in it too (with "any" there, oneDNN offers only its reference code)
            tag = given.layout()
            for dst in ([Desc.tagged(d, out, tag, self.out_dt())] if tag != "blocked" else []) + [None]:
                other = self._pd(given, dst)
                if other is not None and _worth_following(other.implementation, pd.implementation):
                    pd = other
                    break
        if pd.implementation.startswith("ref"):
            raise Unsupported(f"oneDNN has only its reference convolution for {self.layer.name} in {self.dt}")
        if (self.dt == "bf16" and self.has_bias and g > 1 and g == c == k.output and isa_rank(d.isa) >= 4
                and not pd.implementation.startswith("brdgmm")):
            self.bias_post_op = True
            other = self._pd(pd.md("src_md", dims=in_shapes[0]), pd.md("dst_md", dims=out))
            if other is not None and other.implementation.startswith("brdgmm"):
                pd = other
            else:
                self.bias_post_op = False
        self.pd = pd
        return [pd.md("src_md", dims=in_shapes[0])], [pd.md("dst_md", dims=out)]

    def all_post_ops(self) -> list:
        if not self.bias_post_op:
            return self.post_ops
        k = self.kernel
        return [("binary", "add", k.bias, (1, k.output) + (1,) * k.spatial, (self.layer.id, "biases")),
                *self.post_ops]

    def _fast_layout(self, src_dims, dst_dims):
        """A fast kernel in a layout named outright, where "any" got a gemm-based one: a grouped
        convolution of few channels per group (the OD API SSD Inception's first, 3 -> 24 channels
        in 3 groups, 7x7: gemm on plain NCHW 0.155 ms, a direct kernel on 16-channel blocks
        0.069) - oneDNN answers "any" with the layout of its first implementation that takes
        it, and the direct kernels take only a layout given. The widest fast one, or None."""
        best = None
        for tag in LAYOUT_TAGS.get(len(src_dims), ())[1:]:
            src = Desc.tagged(self.d, src_dims, tag, self.dt)
            pd = self._pd(src, Desc.tagged(self.d, dst_dims, tag, self.out_dt()))
            if pd is not None and _fast(pd.implementation) and (
                    best is None or isa_rank(pd.implementation) > isa_rank(best.implementation)):
                best = pd
        return best

    def _pd(self, src, dst, required=False):
        k, d = self.kernel, self.d
        try:
            return conv_pd(d, self.attr(), src, Desc.any(d, self.w_dims, self.dt),
                           Desc.plain(d, (k.output,)) if self.has_bias and not self.bias_post_op else None,
                           self.dst_hint or dst or Desc.any(d, self.out_dims, self.out_dt()),
                           k.stride, [x - 1 for x in k.dilation], k.pad, k.pad_end)
        except DnnlError:
            if required:
                raise
            return None

    def bind(self, ins, outs, scratch):
        k, net = self.kernel, self.network
        weights = constant(self.d, net, self.layer.id, "weights", k.weights, self.pd.md("weights_md", dims=self.w_dims))
        args = {"DNNL_ARG_SRC": ins[0], "DNNL_ARG_WEIGHTS": weights, "DNNL_ARG_DST": outs[0]}
        if self.has_bias and not self.bias_post_op:
            args["DNNL_ARG_BIAS"] = constant(self.d, net, self.layer.id, "biases", k.bias,
                                             Desc.plain(self.d, (k.output,)))
        return [self.primitive(self.pd, args, scratch)]


@register("Deconvolution")
class DeconvolutionOp(NativeOp):
    """Deconvolution (2-D and 3-D, grouped) on oneDNN's deconvolution: the layouts left to the library, bias and
    activations fused. Caffe's weights (C_in, O/g, k...) are oneDNN's (g, O/g, C_in/g, k...) with the two channel
    axes swapped (the same taps: output i*stride + t - pad takes input i through tap t in both)."""
    accepts_post_ops = True

    def create(self, in_descs, in_shapes, out_shapes):
        k, d = self.kernel, self.d
        c, g = in_shapes[0][1], k.group
        self.w_dims = (k.output, c, *k.kernel) if g == 1 else (g, k.output // g, c // g, *k.kernel)
        self.has_bias = k.bias is not None
        try:
            self.pd = conv_pd(d, self.attr(), Desc.any(d, in_shapes[0], self.dt), Desc.any(d, self.w_dims, self.dt),
                              Desc.plain(d, (k.output,)) if self.has_bias else None,
                              self.dst_hint or Desc.any(d, out_shapes[0], self.out_dt()), k.stride,
                              [x - 1 for x in k.dilation], k.pad, k.pad_end, transposed=True)
        except DnnlError as err:
            raise Unsupported(f"oneDNN has no deconvolution for {self.layer.name} in {self.dt}: {err}") from None
        if self.pd.implementation.startswith("ref"):
            raise Unsupported(f"oneDNN has only its reference deconvolution for {self.layer.name} in {self.dt}")
        return [self.pd.md("src_md", dims=in_shapes[0])], [self.pd.md("dst_md", dims=out_shapes[0])]

    def bind(self, ins, outs, scratch):
        k, g = self.kernel, self.kernel.group
        # the numpy kernel's per-group transpose (g, O/g * taps, C_in/g) -> (g, O/g, C_in/g, taps)
        per_group = k.weights_t.reshape(g, k.output // g, int(np.prod(k.kernel)), k.in_channels // g)
        weights = constant(self.d, self.network, self.layer.id, "weights", per_group.transpose(0, 1, 3, 2),
                           self.pd.md("weights_md", dims=self.w_dims))
        args = {"DNNL_ARG_SRC": ins[0], "DNNL_ARG_WEIGHTS": weights, "DNNL_ARG_DST": outs[0]}
        if self.has_bias:
            args["DNNL_ARG_BIAS"] = constant(self.d, self.network, self.layer.id, "biases", k.bias.ravel(),
                                             Desc.plain(self.d, (k.output,)))
        return [self.primitive(self.pd, args, scratch)]
