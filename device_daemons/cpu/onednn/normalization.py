"""LRN (IR Norm), SoftMax and LayerNorm (over the last axis: a transformer's) on oneDNN,
Normalize (across the channels) by our C kernel among the oneDNN steps.

LRN across channels is Caffe's formula as it is; within a channel, Caffe's
1 + alpha/n^2 * sum is oneDNN's within-channel mode with k = 1. oneDNN has no
L2 normalization: Normalize's "primitive" is one C call (native/normalize.c) on the
tensors channels last, made by NativeStep between the primitives around it (CPU
primitives run synchronously), where the numpy kernel needed its input exported and
its output imported again (SSD's conv4_3_norm)."""
from __future__ import annotations

import numpy as np

from ..native import normalize
from .library import DnnlError
from .op import CHANNELS_LAST, NativeOp, Unsupported, constant, need_native, register
from .primitives import Desc, layer_norm_pd, lrn_pd, softmax_pd


class _SameLayout(NativeOp):
    """One input, one output of the same dims, in whatever layout the input has."""

    def bind(self, ins, outs, scratch):
        return [self.primitive(self.pd, {"DNNL_ARG_SRC": ins[0], "DNNL_ARG_DST": outs[0]}, scratch)]


@register("Norm", "LRN")
class LrnOp(_SameLayout):
    def create(self, in_descs, in_shapes, out_shapes):
        k, d = self.kernel, self.d
        src = self.follow(in_descs[0], in_shapes[0])
        if k.region == "across":
            alg, bias = "across_channels", k.k
        else:
            alg, bias = "within_channel", 1.0
        self.pd = lrn_pd(d, self.attr(), alg, src, Desc.any(d, in_shapes[0], self.dt), k.size, k.alpha, k.beta, bias)
        return [src], [self.pd.md("dst_md", dims=out_shapes[0])]


@register("SoftMax", "Softmax")
class SoftMaxOp(_SameLayout):
    inplace = True

    def create(self, in_descs, in_shapes, out_shapes):
        d = self.d
        axis = self.kernel.axis_in(self.kernel.axis, len(in_shapes[0]))
        given = self.follow(in_descs[0], in_shapes[0])
        plain = Desc.plain(d, in_shapes[0], self.dt)
        # its input's layout, else the axis innermost (a softmax over axis 1 of a plain NCHW tensor - a
        # TensorFlow softmax over the last axis of a 4-D one, attention's - has only oneDNN's reference
        # code: 7 ms where the jit one on channels-last takes 0.1), else plain
        candidates = [given] + [desc for desc in (_axis_last(d, in_shapes[0], axis, self.dt), plain)
                                if desc is not None and desc != given]
        fallback = None  # (the reference code, only on the last layout tried)
        for src in candidates:
            # a network output is written plain f32 (no reorder after it)
            for dst in ([Desc.plain(d, in_shapes[0])] if self.out_f32 else []) + [src]:
                try:
                    pd = softmax_pd(d, self.attr(), src, dst, axis)
                except DnnlError:
                    continue
                if not pd.implementation.startswith("ref"):
                    return self._take(pd, src, dst, in_shapes[0])
                if src is candidates[-1] and fallback is None:
                    fallback = (pd, src, dst)
        if fallback is None:
            raise Unsupported("oneDNN makes no softmax of this layout")
        return self._take(*fallback, in_shapes[0])

    def _take(self, pd, src, dst, shape):
        self.pd = pd
        self.inplace = dst is src
        return [src], [pd.md("dst_md", dims=shape)]


@register("LayerNorm")
class LayerNormOp(NativeOp):
    """oneDNN's layer normalization (over the last logical axis, plain layout; weights and biases its scale and
    shift, f32). Over another axis (a ConvNeXt's channels: IR axis 1) the tensor is read with that axis
    innermost (acdb: NHWC's memory) and the primitive made for the same memory with the axes permuted so that
    it is the last one: the same bytes, described as oneDNN's layer normalization wants them."""

    def create(self, in_descs, in_shapes, out_shapes):
        k, d = self.kernel, self.d
        shape = tuple(in_shapes[0])
        axis = k.axis_in(k.axis, len(shape))
        if not 2 <= len(shape) <= 5:
            raise Unsupported("a LayerNorm of rank other than 2 to 5 (numpy runs it)")
        if axis == len(shape) - 1:
            src, dst = Desc.plain(d, shape, self.dt), Desc.plain(d, shape, self.out_dt())
            seen_src, seen_dst = src, dst
        else:
            src, dst = _axis_last(d, shape, axis, self.dt), _axis_last(d, shape, axis, self.out_dt())
            if src is None or dst is None:
                raise Unsupported("oneDNN names no layout with this LayerNorm's axis innermost (numpy runs it)")
            # axis i of the tensor becomes axis perm[i]: `axis` the last, the others in their order
            perm = [i if i < axis else i - 1 for i in range(len(shape))]
            perm[axis] = len(shape) - 1
            seen_src, seen_dst = src.permuted(perm), dst.permuted(perm)
        self.pd = layer_norm_pd(d, self.attr(), seen_src, seen_dst, k.eps, k.weights is not None,
                                k.biases is not None)
        if self.pd.implementation.startswith("ref"):
            raise Unsupported(f"oneDNN has only its reference layer normalization for {self.layer.name}")
        return [src], [dst]

    def bind(self, ins, outs, scratch):
        k, d = self.kernel, self.d
        args = {"DNNL_ARG_SRC": ins[0], "DNNL_ARG_DST": outs[0]}
        for arg, name, values in (("DNNL_ARG_SCALE", "weights", k.weights), ("DNNL_ARG_SHIFT", "biases", k.biases)):
            if values is not None:
                args[arg] = constant(d, self.network, self.layer.id, name, values, Desc.plain(d, (values.size,)))
        return [self.primitive(self.pd, args, scratch)]


def _axis_last(d, dims, axis: int, dt: str):
    """A plain layout of `dims` with `axis` innermost (oneDNN's tag, e.g. acdb), or None (the axis is last
    already, or oneDNN names no such tag)."""
    letters = "abcdefghijkl"[:len(dims)]
    if axis == len(dims) - 1:
        return None
    tag = letters[:axis] + letters[axis + 1:] + letters[axis]
    if not hasattr(d.lib, "dnnl_" + tag):
        return None
    try:
        return Desc.tagged(d, dims, tag, dt)
    except DnnlError:
        return None


@register("Normalize")
class NormalizeOp(NativeOp):
    step_backend = "native"

    def create(self, in_descs, in_shapes, out_shapes):
        k = self.kernel
        if k.across_spatial:
            raise Unsupported("Normalize across_spatial runs on numpy")
        if self.dt != "f32":
            raise Unsupported("Normalize computes in f32")
        if len(in_shapes) != 1 or len(in_shapes[0]) != 4:
            raise Unsupported("Normalize of other than one 4-D input runs on numpy")
        need_native(normalize)
        self.shape = tuple(in_shapes[0])
        self.shared = bool(k.channel_shared or k.scale.size == 1)
        self.scale = np.ascontiguousarray(k.scale.reshape(-1)[:1] if self.shared else k.scale.reshape(-1), np.float32)
        return [Desc.tagged(self.d, in_shapes[0], CHANNELS_LAST)], [Desc.tagged(self.d, out_shapes[0], CHANNELS_LAST)]

    def bind(self, ins, outs, scratch):
        return [_Normalize(self, ins[0], outs[0])]


class _Normalize:
    """The C call as NativeStep runs a primitive: run(stream) on the bound memories (read
    at each run: a network input or output is bound anew per call)."""

    def __init__(self, op: NormalizeOp, src, dst):
        self.op, self.src, self.dst = op, src, dst
        self.count = int(np.prod(op.shape))

    def run(self, stream):
        op = self.op
        x = np.frombuffer(self.src.buffer, np.float32, count=self.count)
        out = np.frombuffer(self.dst.buffer, np.float32, count=self.count)
        normalize.normalize_nhwc(x.reshape(-1, op.shape[1]), op.scale, op.shared, op.kernel.eps,
                                 out.reshape(-1, op.shape[1]))
