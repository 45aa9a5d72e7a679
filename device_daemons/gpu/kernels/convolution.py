"""Convolution and Deconvolution on the GPU (convolution.cl, tiled.cl).

A convolution's variant is a configuration (kernels/tiles.py) that the plan's
tuner picks once per shape (tuning.py): depthwise (one input and one output
channel per group) on every device; then by the device's style
(EngineContext.style):

* "simt" (GPUs): the tiled implicit GEMM of tiled.cl (a TM x TN tile of output
  channels x output pixels a work group, input and weights staged in __local
  memory, a WM x WN register block a work item; tile sizes timed per device by
  the tuner) with weights packed once per tile as [group][K][M] zero-padded; or
  "direct", the kernels before tiling: the 1x1 fast path (1x1 kernel, no
  padding) and the direct kernel, weights packed as
  [group][block of 8 output channels][in channel][ky][kx][8];
* "simd" (CPU OpenCL devices such as PoCL, which run a work group as a loop and
  need vectors inside a work item): a GEMM of the weights (their IR layout) with
  the input itself (1x1, stride 1, no padding) or with im2col columns in a
  scratch buffer of the request; weights packed once as [group][block of 4 output
  channels][k][4].

Every variant can add an Eltwise sum's other input before the activation
(`residual`, set by the plan) and write into its slice of a Concat's buffer
(`place`: element offset and image stride, set by the plan).

Siblings ("simt"): convolutions of one input with the same window, group 1 and
activation (an inception block's 1x1, 3x3_reduce and 5x5_reduce) run as one
tiled GEMM, launched by the first of them (`siblings`: the others, set by the
plan), their weights and biases concatenated along the output channels, each
channel written to its own layer's buffer, offset and image stride (tiled.cl's
SIBLINGS); the others launch nothing (`absorbed_by`). One launch instead of up to
four, and a larger M to fill the device at batch 1.

Pooled ("simt"): a 1x1 convolution (stride 1, no padding) whose input is a max
pooling of stride 1 that keeps the size (GoogLeNet's pool -> pool_proj) reads the
pooling's input and takes each window's maximum in its B loads (`pooled`, set by
the plan; tiled.cl's POOLED): the pooling is never launched nor written.

Volumes (a 3-D window over NCDHW tensors, the CPU kernels' volume.py): one
configuration, {"kernel": "volume"}, on every device and style: volume.cl's
direct conv3d / deconv3d (OCB output channels of one output value a work item,
weights packed as conv_direct's with the depth axis in front of ky), with the
same epilogue (bias, activation, an Eltwise sum's other input, a Concat slice);
never siblings, a pooling read through, Winograd or a 2-D configuration (one
pinned or cached is refused).
"""
from __future__ import annotations

import numpy as np

from .base import ConfigRejected, GpuKernel, Tunable, i32, register, round_up
from .tiles import MMA_K, mma_candidates, mma_valid, tile_candidates

OCB = 8  # output channels per work item of the "direct" kernels (convolution.cl)
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


def pack_tiles(weights: np.ndarray, tm: int, tk: int) -> tuple[np.ndarray, int, int]:
    """(G, M, K) -> [G][Kp][Mp], K and M zero-padded to whole tiles (tiled.cl); and Kp, Mp."""
    g, m, k = weights.shape
    mp, kp = -(-m // tm) * tm, -(-k // tk) * tk
    packed = np.zeros((g, kp, mp), np.float32)
    packed[:, :k, :m] = weights.transpose(0, 2, 1)
    return packed, kp, mp


class _Windowed(GpuKernel):
    program = "convolution.cl"
    fuses_activation = True

    def _common_args(self):
        ref = self.ref
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = ref.kernel, ref.stride, ref.pad, ref.dilation
        return kh, kw, sh, sw, ph, pw, dh, dw

    def _volume_launch(self, name: str, ins, outs, tail: list):
        """volume.cl's conv3d / deconv3d (a 3-D window): OCB output channels of one output value a work
        item; `tail`: the epilogue's OUT_ARGS."""
        ref = self.ref
        n, c, d, h, w = self.in_shapes[0]
        _, o, od, oh, ow = self.out_shapes[0]
        g = ref.group
        window = [v for axis in (ref.kernel, ref.stride, ref.pad, ref.dilation) for v in axis]
        args = [ins[0], self.weights, self.bias, outs[0]] + \
            i32(c, d, h, w, o, od, oh, ow, g, c // g, o // g, self.blocks) + i32(*window) + i32(self.has_bias) + \
            self.act_args() + tail
        return [self.launch(name, args, (round_up(ow, 8), od * oh, n * g * self.blocks),
                            program=self.ctx.program("volume.cl"))]

    def _bias(self):
        b = self.ref.blob("biases", required=False, size=self.ref.output)
        return (self.ctx.upload(b), 1) if b is not None else (self.ctx.dummy, 0)


MAX_SIBLINGS = 4  # destinations of tiled.cl's SIBLINGS epilogue


@register("Convolution")
class Convolution(Tunable, _Windowed):
    residual_ok = True   # an Eltwise sum after it may run in its epilogue
    places_output = True  # may write into its slice of a Concat's buffer
    siblings: tuple = ()  # (set by the plan on the first of sibling convolutions: the others)
    absorbed_by = ""      # (set by the plan on the others: the first's layer name; they launch nothing)
    pooled = None         # (set by the plan: (kh, kw, pad_h, pad_w) of a max pooling read through, tiled.cl's POOLED)

    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        ref = self.ref
        g, o, icg = ref.group, ref.output, ref.in_per_group
        self.volume = ref.spatial == 3  # a 3-D window (NCDHW): volume.cl's conv3d only
        self.w = ref.weights.reshape(g, o // g, icg, *ref.kernel)  # (a view of the CPU kernel's weights)
        self.depthwise = icg == 1 and o == g
        self.direct_1x1 = tuple(ref.kernel) == (1, 1) and ref.pad == (0, 0) and ref.pad_end == (0, 0)
        self.one = self.direct_1x1 and ref.stride == (1, 1)  # the input is the GEMM's B as it is
        self.bias, self.has_bias = self._bias()

    def sibling_key(self) -> tuple:
        """What convolutions of one input share to run as one GEMM (None: never)."""
        ref = self.ref
        if ref.group != 1 or self.residual or self.volume:
            return None
        return (tuple(ref.kernel), tuple(ref.stride), tuple(ref.pad), tuple(ref.pad_end), tuple(ref.dilation),
                self.act)

    def _channels(self) -> int:
        """Output channels of the GEMM: this layer's and its siblings'."""
        return sum(int(shape[1]) for shape in self.out_shapes) if self.siblings else int(self.out_shapes[0][1])

    def _problem(self):
        n = self.in_shapes[0][0]
        _, _, oh, ow = self.out_shapes[0]
        g = self.ref.group
        kh, kw = self.ref.kernel
        return self._channels() // g, n * oh * ow, self.ref.in_per_group * kh * kw, g

    def tune_key(self) -> str:
        if self.volume:
            ref = self.ref
            return "conv3d:in{}:out{}:k{}:s{}:p{}:d{}:g{}".format(
                *("x".join(map(str, v)) for v in (self.in_shapes[0], self.out_shapes[0], ref.kernel, ref.stride,
                                                   ref.pad, ref.dilation)), ref.group)
        kh, kw, sh, sw, ph, pw, dh, dw = self._common_args()
        key = "conv:in{}:out{}:k{}x{}:s{}x{}:p{}x{}:d{}x{}:g{}".format(
            "x".join(map(str, self.in_shapes[0])), "x".join(map(str, self.out_shapes[0])), kh, kw, sh, sw, ph, pw,
            dh, dw, self.ref.group)
        if self.siblings:
            key += ":siblings" + ",".join(str(shape[1]) for shape in self.out_shapes[1:])
        if self.pooled:
            key += ":maxpool{}x{}p{}x{}".format(*self.pooled)
        return key

    def configs(self, mode: str) -> list[dict]:
        if self.volume:  # (never a 2-D variant: the tuner's only choice)
            return [{"kernel": "volume"}]
        if self.depthwise:
            return [{"kernel": "depthwise"}]
        if self.ctx.style == "simd":
            return [{"kernel": "gemm"}]
        m, n, k, g = self._problem()
        tiled = tile_candidates(m, n, k, g, self.ctx.device, mode)
        mma = mma_candidates(m, n, k, g, self.ctx.device, mode) if self.ctx.mma and not self.pooled else []
        if self._quads():  # each with 4 columns a load too
            mma = [v for c in mma for v in (c, dict(c, v4=1)) if mma_valid(v, self.ctx.device)]
        if mode == "default":  # the tensor-core kernel only after a search has checked its results
            return tiled[:1]
        return tiled + mma + self._winograd_configs(mode) + \
            ([{"kernel": "direct"}] if not (self.siblings or self.pooled) else [])

    # ----------------------------------------------------------------- Winograd F(2x2 / 4x4, 3x3)
    def _winograd_ok(self) -> bool:
        ref = self.ref
        return (tuple(ref.kernel) == (3, 3) and tuple(ref.stride) == (1, 1) and tuple(ref.dilation) == (1, 1)
                and ref.group == 1 and not self.siblings and not self.pooled)

    def _tiles(self, m: int) -> tuple[int, int, int]:
        """Winograd's m x m output tiles: (all of them, tiles down, tiles across)."""
        n, _, oh, ow = self.out_shapes[0]
        th, tw = -(-oh // m), -(-ow // m)
        return n * th * tw, th, tw

    def _winograd_configs(self, mode: str) -> list[dict]:
        """The GEMM of the transformed tiles ((m + 2)^2 groups of output channels x
        input channels x tiles) for F(2x2, 3x3) on the tiled kernel ("wino") and, in a
        half plan on tensor cores, on conv_mma ("wino_mma"); for F(4x4, 3x3) on the
        tiled kernel in FP32 plans ("wino4": its transforms lose more precision than
        half storage keeps). Each with its tiles as a GEMM of that size would get them."""
        if not self._winograd_ok():
            return []
        o, c, device = int(self.out_shapes[0][1]), self.ref.in_per_group, self.ctx.device
        t2, t4 = self._tiles(2)[0], self._tiles(4)[0]
        configs = [dict(cfg, kernel="wino") for cfg in tile_candidates(o, t2, c, 16, device, mode)[:6]]
        if self.ctx.mma:
            configs += [dict(cfg, kernel="wino_mma") for cfg in mma_candidates(o, t2, c, 16, device, mode)[:4]]
        if not self.ctx.half:
            configs += [dict(cfg, kernel="wino4") for cfg in tile_candidates(o, t4, c, 36, device, mode)[:6]]
        return configs

    @property
    def variant(self) -> str:
        """The OpenCL kernel that computes the layer (tests and the profile read it)."""
        kind = self.config["kernel"]
        if kind == "direct":
            return "conv_1x1" if self.direct_1x1 else "conv_direct"
        return {"volume": "conv3d", "depthwise": "conv_depthwise", "gemm": "conv_gemm", "tiled": "conv_tiled",
                "mma": "conv_mma", "wino": "winograd", "wino_mma": "winograd", "wino4": "winograd"}[kind]

    def _apply(self, config):
        kind = config["kernel"]
        if (kind == "volume") != self.volume:
            raise ConfigRejected(f"{config}: a 3-D window runs volume.cl's conv3d only, a 2-D one never")
        if kind == "volume":
            g, ocg, icg, kd, kh, kw = self.w.shape
            packed, self.blocks = pack_blocks(self.w.reshape(g, ocg, icg, kd * kh, kw))
            self.weights = self._pack("volume", lambda: self.ctx.upload(packed))
            return
        g, ocg, icg, kh, kw = self.w.shape
        if (self.siblings and kind not in ("tiled", "mma")) or (self.pooled and kind != "tiled"):
            raise ConfigRejected(f"{config}: sibling convolutions run in the tiled GEMMs only, a pooling read "
                                 "through in conv_tiled only")
        if kind in WINOGRAD:
            if not self._winograd_ok() or (kind == "wino4" and self.ctx.half):
                raise ConfigRejected(f"{config}: Winograd is for 3x3 stride-1 convolutions of group 1 (F(4x4, 3x3) "
                                     "in FP32 plans)")
            gemm = dict(config, kernel="mma" if kind == "wino_mma" else "tiled")
            self._program = self._mma_program(gemm) if kind == "wino_mma" else self._tiled_program(gemm)
            size = WINOGRAD[kind]
            self._transforms = self.ctx.program("winograd.cl", defines=(f"-DWINO_M={size}",))
            tk = MMA_K if kind == "wino_mma" else config["tk"]
            packed, self.kp, self.mp = pack_tiles(winograd_weights(self.w[0], size), config["tm"], tk)
            if kind == "wino_mma":
                packed = np.ascontiguousarray(packed.transpose(0, 2, 1))
            self.weights = self._pack((kind, config["tm"], tk), lambda: self.ctx.upload(packed))
        elif kind == "depthwise":
            self.weights = self._pack("depthwise", lambda: self.ctx.upload(self.w.reshape(ocg * g, kh * kw)))
        elif kind == "gemm":
            packed, self.blocks = pack_rows(self.w.reshape(g, ocg, -1))
            self.weights = self._pack("gemm", lambda: self.ctx.upload(packed))
        elif kind == "direct":
            packed, self.blocks = pack_blocks(self.w)
            self.weights = self._pack("direct", lambda: self.ctx.upload(packed))
        elif kind == "mma":
            if config.get("v4") and not self._quads():
                raise ConfigRejected(f"{config}: 4 columns a load only for 1x1 stride-1 layers of 4k-pixel images")
            self._program = self._mma_program(config, ("-DSIBLINGS",) if self.siblings else ())
            w = np.concatenate([self.w] + [s.w for s in self.siblings], axis=1) if self.siblings else self.w
            packed, self.kp, self.mp = pack_tiles(w.reshape(w.shape[0], w.shape[1], -1), config["tm"], MMA_K)
            packed = np.ascontiguousarray(packed.transpose(0, 2, 1))  # [G][Mp][Kp]: K contiguous
            self.weights = self._pack(("mma", config["tm"], bool(self.siblings)), lambda: self.ctx.upload(packed))
            if self.siblings:
                self.bias = self._siblings_bias()
        elif kind == "tiled" and self.siblings:
            self._program = self._tiled_program(config, ("-DSIBLINGS",))
            w = np.concatenate([self.w] + [s.w for s in self.siblings], axis=1)
            packed, self.kp, self.mp = pack_tiles(w.reshape(1, w.shape[1], -1), config["tm"], config["tk"])
            self.weights = self._pack(("siblings", config["tm"], config["tk"]), lambda: self.ctx.upload(packed))
            self.bias = self._siblings_bias()
        elif kind == "tiled":
            self._program = self._tiled_program(config, ("-DPOOLED",) if self.pooled else ())
            packed, self.kp, self.mp = pack_tiles(self.w.reshape(g, ocg, -1), config["tm"], config["tk"])
            self.weights = self._pack(("tiled", config["tm"], config["tk"]), lambda: self.ctx.upload(packed))
        else:
            raise ValueError(f"unknown convolution configuration {config}")

    def _quads(self) -> bool:
        """Can conv_mma load the input 4 columns at a time (ONE4): a 1x1 stride-1
        layer whose images hold a multiple of 4 pixels (so 4 aligned columns are one
        image's, contiguous)."""
        _, _, oh, ow = self.out_shapes[0]
        return self.one and (oh * ow) % 4 == 0

    def _siblings_bias(self):
        """The biases of this layer and its siblings, concatenated (made once)."""
        if getattr(self, "_sibling_bias", None) is None:
            parts = [k.ref.blob("biases", required=False, size=k.ref.output) for k in (self,) + self.siblings]
            self.has_bias = int(any(b is not None for b in parts))
            self._sibling_bias = self.ctx.upload(np.concatenate(
                [np.zeros(k.ref.output, np.float32) if b is None else b
                 for k, b in zip((self,) + self.siblings, parts)])) if self.has_bias else self.ctx.dummy
        return self._sibling_bias

    def scratch_bytes(self):
        """The im2col columns of the GEMM variant (all images); the partial sums of
        a tiled variant whose K is cut into slices."""
        kind = self.config["kernel"]
        if kind == "gemm" and not (self.direct_1x1 and self.ref.stride == (1, 1)):
            n, c = self.in_shapes[0][:2]
            _, _, oh, ow = self.out_shapes[0]
            kh, kw = self.ref.kernel
            return [n * c * kh * kw * oh * ow * self.ctx.dtype.itemsize]
        if kind in ("tiled", "mma") and self.config["ks"] > 1:
            n, _, oh, ow = self.out_shapes[0]
            return [4 * self.config["ks"] * self._channels() * n * oh * ow]
        if kind in WINOGRAD:  # the transformed input, the products, the K slices' sums
            e, t, size = (WINOGRAD[kind] + 2) ** 2, self._tiles(WINOGRAD[kind])[0], self.ctx.dtype.itemsize
            m, c = int(self.out_shapes[0][1]), self.ref.in_per_group
            return [e * c * t * size, e * m * t * size] + ([4 * self.config["ks"] * e * m * t]
                                                           if self.config["ks"] > 1 else [])
        return []

    def _out_args(self, ins):
        """res, out_offset, out_image, has_res of every variant's epilogue."""
        offset, image = self.place or (0, int(np.prod(self.out_shapes[0][1:])))
        return [ins[1] if self.residual else self.ctx.dummy] + i32(offset, image, self.residual)

    def launches(self, ins, outs, scratch=()):
        if self.absorbed_by:
            return []  # computed by the first of its siblings
        kind = self.config["kernel"]
        if kind == "volume":
            return self._volume_launch("conv3d", ins, outs, self._out_args(ins))
        if kind in ("tiled", "mma"):
            return self._tiled_launches(ins, outs, scratch)
        if kind in WINOGRAD:
            return self._winograd_launches(ins, outs, scratch)
        ref = self.ref
        n, c, h, w = self.in_shapes[0]
        _, o, oh, ow = self.out_shapes[0]
        g = ref.group
        kh, kw, sh, sw, ph, pw, dh, dw = self._common_args()
        tail = i32(self.has_bias) + self.act_args() + self._out_args(ins)
        if kind == "gemm":
            result, columns = [], ins[0]
            if scratch:
                columns = scratch[0]
                args = [ins[0], columns] + i32(h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw)
                result.append(self.launch("im2col", args, (round_up(oh * ow, 8), kh * kw, n * c)))
            m, p = o // g, oh * ow
            args = [self.weights, columns, self.bias, outs[0]] + i32(m, p, (c // g) * kh * kw, g, self.blocks) + tail
            result.append(self.launch("conv_gemm", args, (-(-p // 16), self.blocks, n * g)))
            return result
        head = [ins[0], self.weights, self.bias, outs[0]]
        if kind == "depthwise":
            args = head + i32(c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw) + tail
            return [self.launch("conv_depthwise", args, (round_up(ow, 8), oh, n * c))]
        shape = i32(c, h, w, o, oh, ow, g, c // g, o // g, self.blocks)
        if self.direct_1x1:
            args = head + shape + i32(sh, sw) + tail
            return [self.launch("conv_1x1", args, (round_up(oh * ow, 8), 1, n * g * self.blocks))]
        args = head + shape + i32(kh, kw, sh, sw, ph, pw, dh, dw) + tail
        return [self.launch("conv_direct", args, (round_up(ow, 8), oh, n * g * self.blocks))]

    def _window_table(self):
        """koff, kyx of tiled.cl for the current input shape (shared device ints)."""
        _, _, h, w = self.in_shapes[0]
        kh, kw, _, _, _, _, dh, dw = self._common_args()
        if (kh - 1) * dh >= 1 << 15 or (kw - 1) * dw >= 1 << 15:
            raise self.error("a dilated window wider than 32767 pixels is more than the GPU plugin's tiled kernel "
                             "handles")
        ic, ky, kx = np.meshgrid(np.arange(self.ref.in_per_group), np.arange(kh) * dh, np.arange(kw) * dw,
                                 indexing="ij")
        koff = (ic * h * w + ky * w + kx).ravel()
        kyx = ((ky << 16) | kx).ravel()
        return self.ctx.upload_ints(koff), self.ctx.upload_ints(kyx)

    def _sibling_args(self, outs) -> list:
        """tiled.cl's DEST_ARGS: the siblings' buffers, channel bounds, offsets and
        image strides (unused destinations: the first buffer, bound M)."""
        if not self.siblings:
            return []
        _, own, oh, ow = self.out_shapes[0]
        total = self._channels()
        buffers, bounds, places = [], [], []
        start = own
        for i, sibling in enumerate(self.siblings, start=1):
            channels = int(self.out_shapes[i][1])
            buffers.append(outs[i])
            bounds.append(start)
            places += list(sibling.place or (0, channels * oh * ow))
            start += channels
        while len(buffers) < MAX_SIBLINGS - 1:
            buffers.append(outs[0])
            bounds.append(total)
            places += [0, 0]
        return buffers + i32(*bounds) + i32(*places)

    def _tiled_launches(self, ins, outs, scratch):
        cfg = self.config
        n, c, h, w = self.in_shapes[0]
        _, _, oh, ow = self.out_shapes[0]
        o = self._channels()
        m, ntot, k, g = self._problem()
        kh, kw, sh, sw, ph, pw, dh, dw = self._common_args()
        koff, kyx = (self.ctx.dummy_ints, self.ctx.dummy_ints) if self.one else self._window_table()
        ks = cfg["ks"]
        part = scratch[0] if ks > 1 else self.ctx.dummy
        res, offset, image, has_res = self._out_args(ins)
        args = [ins[0], self.weights, self.bias, res, outs[0], part, koff, kyx] + \
            i32(c, h, w, c // g, ow, oh * ow, ntot, g, m, k, self.kp, self.mp, sh, sw, ph, pw, int(self.one), ks) + \
            [offset, image] + i32(self.has_bias, has_res) + self.act_args() + self._sibling_args(outs) + \
            (i32(*self.pooled) if self.pooled else [])
        sums = [part, self.bias, res, outs[0]] + i32(ks, o, oh * ow, ntot) + [offset, image] + \
            i32(self.has_bias, has_res) + self.act_args() + self._sibling_args(outs)
        return self._gemm(args, ntot, m, g, sums, o)

    def _winograd_launches(self, ins, outs, scratch):
        cfg = self.config
        n, c, h, w = self.in_shapes[0]
        _, o, oh, ow = self.out_shapes[0]
        ph, pw = self.ref.pad
        size = WINOGRAD[cfg["kernel"]]
        e = (size + 2) ** 2
        t, th, tw = self._tiles(size)
        v, products = scratch[0], scratch[1]
        ks = cfg["ks"]
        part = scratch[2] if ks > 1 else self.ctx.dummy
        transform = self.launch("wino_in", [ins[0], v] + i32(c, h, w, ph, pw, th, tw, t), (round_up(t, 64), c),
                                program=self._transforms)
        # the GEMM: one "image" of e * c channels of t pixels, e groups, no epilogue
        no_epilogue = i32(0) + [np.float32(0), np.float32(0)]
        args = [v, self.weights, self.ctx.dummy, self.ctx.dummy, products, part, self.ctx.dummy_ints,
                self.ctx.dummy_ints] + i32(e * c, 1, t, c, t, t, t, e, o, c, self.kp, self.mp, 1, 1, 0, 0, 1, ks,
                                           0, e * o * t, 0, 0) + no_epilogue
        sums = [part, self.ctx.dummy, self.ctx.dummy, products] + i32(ks, e * o, t, t, 0, e * o * t, 0, 0) + \
            no_epilogue
        gemm = self._gemm(args, t, o, e, sums, e * o)
        res, offset, image, has_res = self._out_args(ins)
        args = [products, self.bias, res, outs[0]] + i32(o, oh, ow, th, tw, t) + [offset, image] + \
            i32(self.has_bias, has_res) + self.act_args()
        return [transform] + gemm + [self.launch("wino_out", args, (round_up(t, 64), o), program=self._transforms)]


WINOGRAD = {"wino": 2, "wino_mma": 2, "wino4": 4}  # Winograd configurations: the output tile's size

# G of F(m x m, 3x3) (winograd.cl has its B and A): U = G g G^T
_WINOGRAD_G = {2: np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]]),
               4: np.array([[1 / 4, 0.0, 0.0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                            [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0.0, 0.0, 1.0]])}


def winograd_weights(w: np.ndarray, m: int = 2) -> np.ndarray:
    """(M, C, 3, 3) -> U ((m + 2)^2, M, C): G g G^T of each 3x3 kernel g, element
    e = (m + 2) * row + column."""
    g = _WINOGRAD_G[m]
    u = np.einsum("ai,mcij,bj->abmc", g, w.astype(np.float64), g)
    return np.ascontiguousarray(u.reshape((m + 2) ** 2, *w.shape[:2]), np.float32)


@register("Deconvolution")
class Deconvolution(_Windowed):
    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        ref = self.ref
        g, o, cin = ref.group, ref.output, ref.in_channels
        self.volume = ref.spatial == 3  # a 3-D window (NCDHW): volume.cl's deconv3d
        # Caffe's (C_in, C_out/g, kh, kw) -> (g, C_out/g, C_in/g, kh, kw); a volume's kd and kh as one axis
        kw = ref.kernel[-1]
        w = ref.blob("weights").reshape(g, cin // g, o // g, -1, kw).transpose(0, 2, 1, 3, 4)
        packed, self.blocks = pack_blocks(w)
        self.weights = ctx.upload(packed)
        self.bias, self.has_bias = self._bias()

    def launches(self, ins, outs):
        if self.volume:
            return self._volume_launch("deconv3d", ins, outs, [self.ctx.dummy] + i32(
                0, int(np.prod(self.out_shapes[0][1:])), 0))
        ref = self.ref
        n, c, h, w = self.in_shapes[0]
        _, o, oh, ow = self.out_shapes[0]
        g = ref.group
        args = [ins[0], self.weights, self.bias, outs[0]] + i32(c, h, w, o, oh, ow, g, c // g, o // g, self.blocks) \
            + i32(*self._common_args()) + i32(self.has_bias) + self.act_args() + [self.ctx.dummy] + i32(0, o * oh * ow, 0)
        return [self.launch("deconv", args, (round_up(ow, 8), oh, n * g * self.blocks))]
