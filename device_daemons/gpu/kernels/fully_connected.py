"""FullyConnected (Caffe InnerProduct) on the GPU (fully_connected.cl, tiled.cl).

Variants (configurations of kernels/tiles.py, picked per shape by the plan's
tuner): on GPUs ("simt"), "gemv" - a work-group reduction per output, weights in
their IR layout (O, I) read as coalesced 4-value chunks, up to 8 rows of the
batch a pass over the weights (batch 1: a GEMV) - or "block", a skinny GEMM
whose work group shares the batch's rows of x (staged in __local memory)
between its outputs (batch 2 and up: x read once a work group, not once an
output) - or "tiled", the tiled GEMM of tiled.cl with the batch as its N (x is
a batch of 1x1 images of I channels), in a half plan on tensor cores also
"mma" (tiled.cl's conv_mma, batch 2 and up), or "direct", the kernel before
tiling (a work item per output column, weights transposed to (I, O)). On
CPU-like OpenCL devices ("simd"): "rows", a work item runs 8-wide dot products
along weight rows (the IR layout).
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from .base import ConfigRejected, GpuKernel, Tunable, i32, register, round_up
from .convolution import pack_tiles
from .tiles import BLOCK_LX, MMA_K, block_candidates, block_local_floats, block_valid, gemv_candidates, \
    mma_candidates, tile_candidates

RB = 4  # rows per work item of fully_connected / fully_connected_rows (fully_connected.cl)


@register("FullyConnected", "InnerProduct")
class FullyConnected(Tunable):
    program = "fully_connected.cl"
    fuses_activation = True

    def __init__(self, layer, ctx):
        super().__init__(layer, ctx)
        ref = self.ref
        self.bias = ctx.upload(ref.bias) if ref.bias is not None else ctx.dummy
        self.has_bias = int(ref.bias is not None)

    def _rows(self) -> int:
        return int(np.prod(self.out_shapes[0][:-1]))

    def tune_key(self) -> str:
        return f"fc:rows{self._rows()}:in{self.ref.in_size}:out{self.ref.out_size}"

    def configs(self, mode: str) -> list[dict]:
        if self.ctx.style == "simd":
            return [{"kernel": "rows"}]
        rows, i, o = self._rows(), self.ref.in_size, self.ref.out_size
        gemv = gemv_candidates(rows, i, o, self.ctx.device, mode) if rows <= 64 else []
        block = block_candidates(rows, i, o, self.ctx.device, mode) if 2 <= rows <= 64 else []
        tiled = tile_candidates(o, rows, i, 1, self.ctx.device, mode)
        if mode == "default":
            return ((block or gemv) if rows <= 8 else tiled)[:1]
        mma = mma_candidates(o, rows, i, 1, self.ctx.device, mode) if self.ctx.mma and rows >= 2 else []
        return block + gemv + tiled + mma + [{"kernel": "direct"}]

    @property
    def variant(self) -> str:
        return {"rows": "fully_connected_rows", "direct": "fully_connected", "gemv": "fc_gemv",
                "block": "fc_block", "tiled": "conv_tiled", "mma": "conv_mma"}[self.config["kernel"]]

    def _apply(self, config):
        kind, ref = config["kernel"], self.ref
        if kind in ("rows", "gemv", "block"):  # the IR layout (O, I)
            self.weights = self._pack("rows", lambda: self.ctx.upload(ref.weights_t.T))
            if kind == "gemv":
                self._program = self.ctx.program(self.program, defines=(f"-DGRB={config['rb']}",))
            elif kind == "block":
                if not block_valid(config, self.ctx.device):
                    raise ConfigRejected(f"{config} is not a configuration the device can run")
                self._program = self.ctx.program(self.program, defines=(
                    f"-DGRB={config['rb']}", f"-DOPT={config['opt']}", f"-DKC={config['kc']}"))
        elif kind == "direct":
            self.weights = self._pack("direct", lambda: self.ctx.upload(ref.weights_t))
        elif kind == "tiled":
            self._program = self._tiled_program(config)
            packed, self.kp, self.mp = pack_tiles(ref.weights_t.T[None], config["tm"], config["tk"])
            self.weights = self._pack(("tiled", config["tm"], config["tk"]), lambda: self.ctx.upload(packed))
        elif kind == "mma":  # weights [1][Mp][Kp]: the IR layout (O, I) padded
            self._program = self._mma_program(config)
            packed, self.kp, self.mp = pack_tiles(ref.weights_t.T[None], config["tm"], MMA_K)
            self.weights = self._pack(("mma", config["tm"]),
                                      lambda: self.ctx.upload(np.ascontiguousarray(packed.transpose(0, 2, 1))))
        else:
            raise ValueError(f"unknown fully connected configuration {config}")

    def scratch_bytes(self):
        if self.config["kernel"] in ("tiled", "mma") and self.config["ks"] > 1:
            return [4 * self.config["ks"] * self._rows() * self.ref.out_size]
        return []

    def launches(self, ins, outs, scratch=()):
        ref, cfg = self.ref, self.config
        rows, i, o = self._rows(), ref.in_size, ref.out_size
        kind = cfg["kernel"]
        if kind in ("tiled", "mma"):  # a batch of 1x1 images of i channels
            ks = cfg["ks"]
            part = scratch[0] if ks > 1 else self.ctx.dummy
            tail = i32(self.has_bias, 0) + self.act_args()
            args = [ins[0], self.weights, self.bias, self.ctx.dummy, outs[0], part, self.ctx.dummy_ints,
                    self.ctx.dummy_ints] + i32(i, 1, 1, i, 1, 1, rows, 1, o, i, self.kp, self.mp, 1, 1, 0, 0, 1,
                                               ks, 0, o) + tail
            sums = [part, self.bias, self.ctx.dummy, outs[0]] + i32(ks, o, 1, rows, 0, o) + tail
            return self._gemm(args, rows, o, 1, sums, o)
        args = [ins[0], self.weights, self.bias, outs[0]] + i32(rows, i, o, self.has_bias) + self.act_args()
        if kind == "gemv":
            lx, opw, rb = cfg["lx"], cfg["opw"], cfg["rb"]
            return [self.launch("fc_gemv", args + [cl.LocalMemory(4 * lx * opw * rb)],
                                (lx, round_up(o, opw), -(-rows // rb)), (lx, opw, 1), program=self._program)]
        if kind == "block":
            ny, per_group = cfg["ny"], cfg["ny"] * cfg["opt"]
            return [self.launch("fc_block", args + [cl.LocalMemory(4 * block_local_floats(cfg))],
                                (BLOCK_LX, -(-o // per_group) * ny, -(-rows // cfg["rb"])), (BLOCK_LX, ny, 1),
                                program=self._program)]
        if kind == "rows":
            return [self.launch("fully_connected_rows", args, (o, -(-rows // RB)))]
        return [self.launch("fully_connected", args, (round_up(o, 8), -(-rows // RB)))]


@register("MatMul")
class MatMul(GpuKernel):
    """A product of two tensors: one work item per output value. Each operand's leading axes are the output's or
    all 1 (broadcast); other broadcasts are left to the CPU (HETERO)."""
    program = "fully_connected.cl"

    def configure(self, in_shapes, out_shapes):
        super().configure(in_shapes, out_shapes)
        out = self.out_shapes[0]
        batch = tuple(out[:-2])
        for shape in self.in_shapes:
            lead = tuple(shape[:-2])
            if int(np.prod(lead, dtype=np.int64)) != 1 and (len(lead) != len(batch) or lead != batch):
                raise self.error(f"broadcasts {list(shape)} to the leading axes {list(batch)}: the GPU MatMul takes "
                                 "operands whose leading axes are the output's or all 1 (run it on the CPU: HETERO)")

    def launches(self, ins, outs):
        ref, (a, b), out = self.ref, self.in_shapes, self.out_shapes[0]
        m, n = int(out[-2]), int(out[-1])
        k = int(a[-2] if ref.transpose_a else a[-1])
        batches = int(np.prod(out[:-2], dtype=np.int64))
        strides = [0 if int(np.prod(s[:-2], dtype=np.int64)) == 1 else int(s[-1] * s[-2]) for s in (a, b)]
        args = [ins[0], ins[1], outs[0]] + i32(m, n, k, *strides, int(ref.transpose_a), int(ref.transpose_b))
        return [self.launch("matmul_batched", args, (round_up(n, 8), round_up(m, 8), batches))]
