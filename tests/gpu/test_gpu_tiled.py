"""The GPU-style ("simt") kernel variants against the CPU plan, on real OpenCL
(PoCL here: the tiled kernels run on it as on a GPU, only slower): each family
of tile configurations of the tiled implicit GEMM (tiles.py) on convolutions
whose sizes are no multiple of the tiles (groups, strides, dilation, padding,
1x1, depthwise), K cut into slices, FullyConnected as a work-group GEMV and as
the tiled GEMM and the skinny-GEMM block, FP32 and FP16 (half storage); the
tensor-core GEMM of half plans (conv_mma) on a device that has them, else in its
emulation (MO_CORE_GPU_MMA=emulate: the PTX fragments' register layout computed
in plain OpenCL)."""
from __future__ import annotations

import numpy as np
import pytest

from device_daemons.gpu.kernels.tiles import block_config, gemv_config, mma_config, tile_config
from tests.gpu.gpu_helpers import compare_layer, rand

PRECISIONS = ["FP32", "FP16"]

# one configuration per family: square and tall/wide tiles, register blocks from
# 2x2 to 8x4, K steps 8 to 32, fewer work items than a tile row or column (the
# loaders' several columns / passes), K slices (3: slices of unequal or no work; 16: the short search's
# doubled split, most slices empty on these small K)
TILES = [tile_config(64, 64, 16, 4, 4), tile_config(32, 32, 16, 4, 4), tile_config(16, 64, 16, 2, 4),
         tile_config(64, 16, 16, 4, 2), tile_config(128, 64, 16, 8, 4), tile_config(32, 32, 8, 2, 2),
         tile_config(16, 16, 32, 2, 2), tile_config(64, 32, 16, 8, 2), tile_config(32, 32, 16, 4, 4, ks=3),
         tile_config(16, 64, 8, 2, 4, ks=2), tile_config(16, 16, 16, 2, 2, ks=16),
         # float4 __local reads: square, 8x4 and 4x8 blocks, K slices
         tile_config(64, 64, 16, 4, 4, vec=True), tile_config(128, 64, 16, 8, 4, ks=3, vec=True),
         tile_config(32, 128, 8, 4, 8, vec=True)]
TILE_IDS = ["{tm}x{tn}x{tk}_{wm}x{wn}_ks{ks}".format(**c) + "_vec" * c.get("vec", 0) for c in TILES]

# (n, c, h, w, o, kernel (kh, kw), stride, dilation, pads_begin, pads_end, group)
CONVS = {
    "3x3_padded": (2, 7, 9, 11, 13, (3, 3), (1, 1), (1, 1), (1, 0), (0, 1), 1),
    "strided_dilated_grouped": (1, 6, 13, 10, 10, (3, 3), (2, 2), (2, 2), (2, 1), (1, 2), 2),
    "pointwise": (2, 19, 5, 7, 21, (1, 1), (1, 1), (1, 1), (0, 0), (0, 0), 1),
    "pointwise_strided_grouped": (1, 9, 9, 8, 6, (1, 1), (2, 2), (1, 1), (0, 0), (0, 0), 3),
    "depthwise": (2, 5, 8, 9, 5, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 5),
    "wide_window_stride_3x1": (1, 4, 12, 7, 70, (5, 3), (3, 1), (1, 1), (2, 1), (0, 0), 1),
}


def conv_case(rng, n, c, h, w, o, k, s, d, p, pe, g):
    oh = (h + p[0] + pe[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + p[1] + pe[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    data = {"kernel": "{},{}".format(*k), "strides": "{},{}".format(*s), "dilations": "{},{}".format(*d),
            "pads_begin": "{},{}".format(*p), "pads_end": "{},{}".format(*pe), "output": o, "group": g}
    blobs = {"weights": rand(rng, o, c // g, *k), "biases": rand(rng, o)}
    return data, [rand(rng, n, c, h, w)], [(n, o, oh, ow)], blobs


def pinned_conv(tmp_path, device, name, spec, config, precision):
    """The plan of the one convolution `spec` (conv_case's arguments, seeded by the
    case's name) in the GPU style with `config` pinned, checked against the CPU plan."""
    data, inputs, outs, blobs = conv_case(np.random.default_rng(len(name)), *spec)
    return compare_layer(tmp_path, device, "Convolution", data, inputs, outs, blobs, precision, style="simt",
                         config=config)[1]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("config", TILES, ids=TILE_IDS)
@pytest.mark.parametrize("case", sorted(CONVS))
def test_tiled_convolution(tmp_path, gpu_device, case, config, precision):
    plan = pinned_conv(tmp_path, gpu_device, case, CONVS[case], config, precision)
    kernel = plan.steps[0].kernel
    assert kernel.variant == "conv_tiled" and kernel.config == config
    assert kernel.one == (case == "pointwise")  # the 1x1 path without window arithmetic
    launches = kernel.launches([plan.ctx.dummy], [plan.ctx.dummy], [plan.ctx.dummy])
    assert [launch.name for launch in launches] == ["conv_tiled"] + ["splitk_sum"] * (config["ks"] > 1)


# warp blocks 32x32 and 64x32, one to four warps along a side, K slices (3: unequal and empty slices)
MMA_TILES = [mma_config(64, 64, 32, 32), mma_config(32, 64, 32, 32, ks=3), mma_config(64, 32, 32, 32),
             mma_config(128, 64, 64, 32)]
MMA_IDS = ["{tm}x{tn}_{wtm}x{wtn}_ks{ks}".format(**c) for c in MMA_TILES]


@pytest.mark.parametrize("config", MMA_TILES, ids=MMA_IDS)
@pytest.mark.parametrize("case", sorted(set(CONVS) - {"depthwise"}))
def test_tensor_core_convolution(tmp_path, gpu_device, mma, case, config):
    plan = pinned_conv(tmp_path, gpu_device, case, CONVS[case], config, "FP16")
    kernel = plan.steps[0].kernel
    assert kernel.variant == "conv_mma" and kernel.config == config and plan.ctx.mma
    launches = kernel.launches([plan.ctx.dummy], [plan.ctx.dummy], [plan.ctx.dummy])
    assert [launch.name for launch in launches] == ["conv_mma"] + ["splitk_sum"] * (config["ks"] > 1)


@pytest.mark.parametrize("config", [mma_config(64, 32, 32, 32), mma_config(32, 64, 32, 32, ks=3)],
                         ids=["64x32", "32x64_ks3"])
@pytest.mark.parametrize("rows,size,out", [(3, 64, 33), (9, 130, 7), (11, 5, 70)])
def test_fully_connected_on_tensor_cores(tmp_path, gpu_device, mma, rows, size, out, config):
    """The batch as the GEMM's N (1x1 images), inputs not a multiple of a stage
    (32) nor of 8 halves, outputs not a multiple of a tile, K slices."""
    rng = np.random.default_rng(rows)
    _, plan = compare_layer(tmp_path, gpu_device, "FullyConnected", {"out-size": out}, [rand(rng, rows, size)],
                            [(rows, out)], {"weights": rand(rng, out, size), "biases": rand(rng, out)}, "FP16",
                            style="simt", config=config)
    kernel = plan.steps[0].kernel
    assert kernel.config == config and kernel.variant == "conv_mma"


# 1x1 stride-1 layers of 4k-pixel images: the input loaded 4 columns at a time (ONE4); K odd (a pair
# half past the end), a partial tile of columns, groups
QUAD_CONVS = {"pointwise_24px": (2, 19, 4, 6, 21, (1, 1), (1, 1), (1, 1), (0, 0), (0, 0), 1),
              "pointwise_grouped": (1, 12, 4, 4, 9, (1, 1), (1, 1), (1, 1), (0, 0), (0, 0), 3)}


@pytest.mark.parametrize("config", [mma_config(64, 64, 32, 32), mma_config(128, 64, 32, 32, ks=3),
                                    mma_config(32, 64, 32, 32)], ids=["64x64", "128x64_ks3", "32x64"])
@pytest.mark.parametrize("case", sorted(QUAD_CONVS))
def test_tensor_core_pointwise_convolution_four_columns_a_load(tmp_path, gpu_device, mma, case, config):
    config = dict(config, v4=1)
    plan = pinned_conv(tmp_path, gpu_device, case, QUAD_CONVS[case], config, "FP16")
    kernel = plan.steps[0].kernel
    assert kernel.config == config and kernel.variant == "conv_mma"
    assert any(c.get("v4") for c in kernel.configs("1"))


def test_four_columns_a_load_only_where_a_quad_is_one_images(tmp_path, gpu_device, mma):
    """35-pixel images (and 3x3 windows) never take ONE4: not offered, and refused when pinned."""
    rng = np.random.default_rng(2)
    data, inputs, outs, blobs = conv_case(rng, *CONVS["pointwise"])
    config = dict(mma_config(64, 64, 32, 32), v4=1)
    _, plan = compare_layer(tmp_path, gpu_device, "Convolution", data, inputs, outs, blobs, "FP16", style="simt",
                            config=config)
    kernel = plan.steps[0].kernel
    assert kernel.config != config and not any(c.get("v4") for c in kernel.configs("full"))


@pytest.mark.parametrize("case", ["3x3_padded", "batch3_wide"])
def test_winograd_on_tensor_cores(tmp_path, gpu_device, mma, case):
    config = dict(mma_config(32, 64, 32, 32, ks=2), kernel="wino_mma")
    plan = pinned_conv(tmp_path, gpu_device, case, WINO_CONVS[case], config, "FP16")
    kernel = plan.steps[0].kernel
    assert kernel.variant == "winograd" and kernel.config == config and kernel.verify(config)
    assert any(c["kernel"] == "wino_mma" for c in kernel.configs("1"))


def test_tensor_cores_only_for_half_plans_and_only_after_a_search(tmp_path, gpu_device, mma, monkeypatch):
    """An FP32 plan never offers the tensor-core kernel (TF32 would change its
    numbers); a half plan offers it to the search, not as the heuristic's guess
    (the search checks its results first); MO_CORE_GPU_MMA=0 turns it off."""
    rng = np.random.default_rng(3)
    data, inputs, outs, blobs = conv_case(rng, *CONVS["3x3_padded"])
    _, fp32 = compare_layer(tmp_path / "a", gpu_device, "Convolution", data, inputs, outs, blobs, "FP32",
                            style="simt")
    assert not fp32.ctx.mma and all(c["kernel"] != "mma" for c in fp32.steps[0].kernel.configs("full"))
    _, fp16 = compare_layer(tmp_path / "b", gpu_device, "Convolution", data, inputs, outs, blobs, "FP16",
                            style="simt")
    kernel = fp16.steps[0].kernel
    assert any(c["kernel"] == "mma" for c in kernel.configs("1"))
    assert kernel.configs("default")[0]["kernel"] == "tiled"
    monkeypatch.setenv("MO_CORE_GPU_MMA", "0")
    _, off = compare_layer(tmp_path / "c", gpu_device, "Convolution", data, inputs, outs, blobs, "FP16",
                           style="simt")
    assert not off.ctx.mma and all(c["kernel"] != "mma" for c in off.steps[0].kernel.configs("full"))


# Winograd F(2x2, 3x3) and F(4x4, 3x3): odd output sizes (part tiles at the edges), asymmetric padding,
# no padding, batches; the GEMM of the transformed tiles on tiled configurations (K slices, float4 reads)
WINO_CONVS = {"3x3_padded": CONVS["3x3_padded"],
              "odd_unpadded": (1, 5, 8, 7, 6, (3, 3), (1, 1), (1, 1), (0, 0), (0, 0), 1),
              "batch3_wide": (3, 3, 5, 13, 9, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1)}
WINO_TILES = [dict(tile_config(16, 32, 8, 2, 4), kernel="wino"),
              dict(tile_config(32, 16, 8, 4, 2, ks=3), kernel="wino"),
              dict(tile_config(32, 32, 16, 4, 4, vec=True), kernel="wino")]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("config", WINO_TILES, ids=["16x32", "32x16_ks3", "32x32_vec"])
@pytest.mark.parametrize("case", sorted(WINO_CONVS))
def test_winograd_convolution(tmp_path, gpu_device, case, config, precision):
    plan = pinned_conv(tmp_path, gpu_device, case, WINO_CONVS[case], config, precision)
    kernel = plan.steps[0].kernel
    assert kernel.variant == "winograd" and kernel.config == config
    launches = kernel.launches([plan.ctx.dummy], [plan.ctx.dummy], [plan.ctx.dummy] * 3)
    assert [x.name for x in launches] == ["wino_in", "conv_tiled"] + ["splitk_sum"] * (config["ks"] > 1) + \
        ["wino_out"]


@pytest.mark.parametrize("config", [dict(tile_config(16, 32, 8, 2, 4), kernel="wino4"),
                                    dict(tile_config(32, 32, 16, 4, 4, ks=2, vec=True), kernel="wino4")],
                         ids=["16x32", "32x32_ks2_vec"])
@pytest.mark.parametrize("case", sorted(WINO_CONVS))
def test_winograd_4x4_convolution(tmp_path, gpu_device, case, config):
    """F(4x4, 3x3): tiles of 4 (3 of the 4 rows or columns past the edge on these sizes), FP32 plans."""
    plan = pinned_conv(tmp_path, gpu_device, case, WINO_CONVS[case], config, "FP32")
    kernel = plan.steps[0].kernel
    assert kernel.variant == "winograd" and kernel.config == config
    assert any(c["kernel"] == "wino4" for c in kernel.configs("1"))


def test_winograd_4x4_not_for_half_plans(tmp_path, gpu_device):
    config = dict(tile_config(16, 32, 8, 2, 4), kernel="wino4")
    plan = pinned_conv(tmp_path, gpu_device, "3x3_padded", CONVS["3x3_padded"], config, "FP16")
    kernel = plan.steps[0].kernel
    assert kernel.config != config and not any(c["kernel"] == "wino4" for c in kernel.configs("full"))


@pytest.mark.parametrize("case", sorted(set(CONVS) - {"3x3_padded"}))
def test_winograd_only_for_3x3_stride_1_group_1(tmp_path, gpu_device, case):
    """Other windows, strides, dilations and groups are neither offered Winograd nor take it pinned."""
    rng = np.random.default_rng(1)
    data, inputs, outs, blobs = conv_case(rng, *CONVS[case])
    config = WINO_TILES[0]
    _, plan = compare_layer(tmp_path, gpu_device, "Convolution", data, inputs, outs, blobs, style="simt",
                            config=config)
    kernel = plan.steps[0].kernel
    assert kernel.config != config and not any(c["kernel"].startswith("wino") for c in kernel.configs("full"))


def test_a_convolution_without_bias_on_the_heuristic_tile(tmp_path, gpu_device):
    rng = np.random.default_rng(5)
    data, inputs, outs, blobs = conv_case(rng, *CONVS["3x3_padded"])
    compare_layer(tmp_path, gpu_device, "Convolution", data, inputs, outs, {"weights": blobs["weights"]},
                  style="simt")


FC_CONFIGS = [gemv_config(32, 1, 1), gemv_config(64, 2, 2), gemv_config(16, 4, 8), gemv_config(128, 1, 4),
              tile_config(32, 32, 16, 4, 4), tile_config(16, 16, 16, 2, 2, ks=3), tile_config(64, 16, 8, 4, 2),
              tile_config(64, 16, 16, 4, 4, ks=2, vec=True),
              block_config(4, 4, 8, kc=128), block_config(2, 3, 2, kc=128), block_config(8, 1, 1, kc=256),
              {"kernel": "direct"}]
FC_IDS = ["gemv_{lx}x{opw}_rb{rb}".format(**c) if c["kernel"] == "gemv" else
          "block_{ny}x{opt}_rb{rb}_kc{kc}".format(**c) if c["kernel"] == "block" else
          "tiled_{tm}x{tn}x{tk}_ks{ks}".format(**c) + "_vec" * c.get("vec", 0) if c["kernel"] == "tiled" else
          c["kernel"] for c in FC_CONFIGS]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("config", FC_CONFIGS, ids=FC_IDS)
@pytest.mark.parametrize("rows,size,out", [(1, 37, 19), (3, 64, 33), (9, 130, 7), (11, 5, 70)])
def test_fully_connected_variants(tmp_path, gpu_device, rows, size, out, config, precision):
    """Rows (the batch) not a multiple of the gemv's rows a pass, inputs not a
    multiple of its 4-value loads, outputs not a multiple of a tile."""
    rng = np.random.default_rng(rows)
    _, plan = compare_layer(tmp_path, gpu_device, "FullyConnected", {"out-size": out}, [rand(rng, rows, size)],
                            [(rows, out)], {"weights": rand(rng, out, size), "biases": rand(rng, out)}, precision,
                            style="simt", config=config)
    kernel = plan.steps[0].kernel
    assert kernel.config == config
    assert kernel.variant == {"gemv": "fc_gemv", "tiled": "conv_tiled", "direct": "fully_connected",
                              "block": "fc_block"}[config["kernel"]]


@pytest.mark.parametrize("rows,expected", [(1, "fc_gemv"), (2, "fc_block"), (8, "fc_block"), (9, "conv_tiled")])
def test_fully_connected_heuristic_gemv_at_batch_1_block_to_8_gemm_above(tmp_path, gpu_device, rows, expected):
    rng = np.random.default_rng(rows)
    _, plan = compare_layer(tmp_path, gpu_device, "FullyConnected", {"out-size": 10}, [rand(rng, rows, 40)],
                            [(rows, 10)], {"weights": rand(rng, 10, 40), "biases": rand(rng, 10)}, style="simt")
    assert plan.steps[0].kernel.variant == expected
