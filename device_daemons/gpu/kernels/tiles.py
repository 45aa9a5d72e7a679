"""Tile configurations of the "simt" GEMM kernels (tiled.cl) and of the
FullyConnected reduction (fully_connected.cl's fc_gemv): which ones are valid on
a device, which ones the tuner tries for a problem, and the heuristic choice
used without tuning.

A configuration is a small JSON-able dict (it goes into the tuning cache):
  {"kernel": "tiled", "tm": 64, "tn": 64, "tk": 16, "wm": 4, "wn": 4, "ks": 1}
      a TM x TN output tile a work group, TK rows of K staged in __local memory a
      step, a WM x WN register block a work item, K cut into ks slices; with
      "vec": 1 (WM and WN multiples of 4) the block's rows and columns are quads
      read from __local memory as float4s (tiled.cl's VEC);
  {"kernel": "gemv", "lx": 64, "opw": 2, "rb": 1}
      FullyConnected: lx work items reduce one output's dot product, opw outputs
      a work group, rb rows of the batch a pass over the weights;
  {"kernel": "block", "ny": 4, "opt": 4, "rb": 8, "kc": 512}
      FullyConnected at batch 2 and up: rows of 32 work items, ny a work group,
      each row opt outputs for rb rows of the batch, kc values of those rows of x
      staged in __local memory and shared by the group's outputs;
  {"kernel": "mma", "tm": 64, "tn": 64, "wtm": 32, "wtn": 32, "ks": 1}
      half plans on NVIDIA tensor cores (tiled.cl's conv_mma): a TM x TN tile a
      work group, a WTM x WTN block a warp, K cut into ks slices; "v4": 1 (1x1
      stride-1 convolutions of images of a multiple of 4 pixels) loads the input
      4 columns at a time (tiled.cl's ONE4);
  {"kernel": "direct"}
      the kernels of the plugin before tiling (convolution.cl's conv_direct /
      conv_1x1, fully_connected.cl's fully_connected): a candidate of its own, so
      that the tuner never picks something slower than them.
"""
from __future__ import annotations

import itertools

# (tm, tn, tk, wm, wn): the tiles the short search ("1") draws from
FULL_MAX = 48  # the "full" search's candidates per problem (each tile a program to build)
BASE_TILES = [
    (64, 64, 16, 4, 4), (32, 32, 16, 4, 4), (64, 32, 16, 4, 4), (32, 64, 16, 4, 4), (128, 64, 16, 8, 4),
    (64, 128, 16, 4, 8), (128, 128, 16, 8, 8), (16, 64, 16, 2, 4), (64, 16, 16, 4, 2), (32, 16, 16, 4, 2),
    (16, 32, 16, 2, 4), (32, 32, 8, 2, 2), (16, 16, 16, 2, 2), (32, 32, 32, 4, 4), (64, 32, 32, 4, 4),
    (32, 64, 32, 4, 4),
]
MAX_SPLIT = 8


def tile_config(tm, tn, tk, wm, wn, ks=1, vec=False) -> dict:
    config = {"kernel": "tiled", "tm": tm, "tn": tn, "tk": tk, "wm": wm, "wn": wn, "ks": ks}
    return dict(config, vec=1) if vec else config


def _vec_ok(config) -> bool:
    return config["wm"] % 4 == 0 and config["wn"] % 4 == 0


def tile_threads(config) -> int:
    return (config["tm"] // config["wm"]) * (config["tn"] // config["wn"])


def tile_valid(config, device) -> bool:
    """Power-of-two tiles whose work group and __local arrays the device allows."""
    tm, tn, tk, wm, wn = (config[k] for k in ("tm", "tn", "tk", "wm", "wn"))
    if any(v <= 0 or v & (v - 1) for v in (tm, tn, tk, wm, wn)) or tm % wm or tn % wn:
        return False
    if config.get("vec", 0) not in (0, 1) or (config.get("vec") and not _vec_ok(config)):
        return False
    threads = tile_threads(config)
    local_bytes = 4 * tk * (tm + tn)
    return 16 <= threads <= min(256, device.max_work_group) and local_bytes <= device.local_memory


def tile_defines(config) -> tuple:
    return tuple(f"-D{k.upper()}={config[k]}" for k in ("tm", "tn", "tk", "wm", "wn")) + \
        (("-DVEC",) if config.get("vec") else ())


def _groups(config, m, n, g):
    return -(-m // config["tm"]) * -(-n // config["tn"]) * g


def split_for(config, m, n, k, g, device) -> int:
    """K slices that bring a small output's work groups near two per compute unit
    (only for long K: each slice keeps at least 4 steps of TK)."""
    ks = 1
    while ks < MAX_SPLIT and _groups(config, m, n, g) * ks * 2 <= 2 * device.compute_units and \
            k // (ks * 2) >= 4 * config["tk"]:
        ks *= 2
    return ks


def _fill_score(config, m, n, g, device) -> float:
    """Higher is better: little padding waste, enough work groups for the device."""
    tm, tn = config["tm"], config["tn"]
    waste = (-(-m // tm) * tm * -(-n // tn) * tn) / float(m * n)
    fill = min(1.0, _groups(config, m, n, g) * config["ks"] / float(2 * device.compute_units))
    return fill / waste


def _score(config, m, n, g, device) -> float:
    """_fill_score and a larger register block (more multiply-adds per __local read)."""
    block = config["wm"] * config["wn"] / float(config["wm"] + config["wn"])
    return _fill_score(config, m, n, g, device) * block


def tile_candidates(m, n, k, g, device, mode: str) -> list[dict]:
    """Tiled GEMM configurations for an (M x K) x (K x N) problem with g groups,
    best guess first. mode "default": the heuristic's one; "1": a handful; "full":
    the FULL_MAX best-scored valid tiles of a wider grid, with and without K slices."""
    if mode == "full":
        shapes = [(tm, tn, tk, wm, wn) for tm, tn, tk, wm, wn in
                  itertools.product((16, 32, 64, 128), (16, 32, 64, 128), (8, 16, 32), (2, 4, 8), (2, 4, 8))]
    else:
        shapes = BASE_TILES
    configs = []
    for shape in shapes:
        base = tile_config(*shape)
        if not tile_valid(base, device) or (mode == "full" and not 64 <= tile_threads(base) <= 256):
            continue
        configs.append(dict(base, ks=split_for(base, m, n, k, g, device)))
        if mode == "full":
            configs += [dict(base, ks=s) for s in (1, 2, 4, 8) if s != configs[-1]["ks"] and k // s >= 2 * shape[2]]
    configs.sort(key=lambda c: -_score(c, m, n, g, device))
    if mode == "full":  # each block with its float4 twin next to it
        configs = [v for c in configs for v in ([c, dict(c, vec=1)] if _vec_ok(c) else [c])]
    if mode == "default":
        return configs[:1]
    if mode == "1":
        chosen = configs[:5]
        # the best two without K slices too: a second launch is not free
        chosen += [dict(c, ks=1) for c in chosen[:2] if c["ks"] > 1]
        # and with twice the slices: twice the work groups for a small output (batch 1's late layers
        # filled an H200's 132 SMs with one or two groups each)
        chosen += [dict(c, ks=c["ks"] * 2) for c in chosen[:2]
                   if c["ks"] * 2 <= 2 * MAX_SPLIT and k // (c["ks"] * 2) >= 2 * c["tk"]]
        # the float4 __local reads of the best three blocks that have them
        chosen += [dict(c, vec=1) for c in [c for c in chosen if _vec_ok(c)][:3]]
        return _unique(chosen)
    return _unique(configs)[:FULL_MAX]


def gemv_config(lx, opw, rb) -> dict:
    return {"kernel": "gemv", "lx": lx, "opw": opw, "rb": rb}


def gemv_candidates(rows, inputs, outputs, device, mode: str) -> list[dict]:
    """fc_gemv configurations, heuristic first: enough work items per output to
    stream a long row with 4-wide loads, a pass over the weights for up to 8 rows."""
    rb = 1
    while rb < min(rows, 8):
        rb *= 2
    lx_best = 32
    while lx_best < 256 and lx_best * 16 < inputs:
        lx_best *= 2
    grid = [(lx, opw) for lx in (32, 64, 128, 256) for opw in (1, 2, 4, 8) if lx * opw <= min(256, device.max_work_group)]
    if mode == "1":
        grid = [(lx, opw) for lx, opw in grid if lx in (lx_best // 2, lx_best, lx_best * 2) and opw in (1, 2, 4)]
    grid.sort(key=lambda p: (abs(p[0] - lx_best), p[0] * p[1] != 128, p[1]))
    rbs = [v for v in (1, 2, 4, 8) if v <= rb] if mode == "full" else [rb]
    configs = [gemv_config(lx, opw, r) for lx, opw in grid for r in rbs]
    return configs[:1] if mode == "default" else configs


MMA_K = 32  # K values a stage of conv_mma (tiled.cl's MK)
# (tm, tn, wtm, wtn) of conv_mma: 2 to 8 warps, each 32x32 to 64x64
MMA_TILES = [(64, 64, 32, 32), (128, 64, 64, 32), (64, 128, 32, 64), (128, 128, 64, 64), (32, 64, 32, 32),
             (64, 32, 32, 32), (128, 128, 64, 32), (128, 64, 32, 32)]


def mma_config(tm, tn, wtm, wtn, ks=1) -> dict:
    return {"kernel": "mma", "tm": tm, "tn": tn, "wtm": wtm, "wtn": wtn, "ks": ks}


def mma_threads(config) -> int:
    return (config["tm"] // config["wtm"]) * (config["tn"] // config["wtn"]) * 32


def mma_valid(config, device) -> bool:
    """Warp blocks of whole m16n8 tiles, and the loads of a stage spread evenly:
    each work item one input column (threads a multiple of TN) and whole 8-half
    weight loads (4 * TM a multiple of the threads)."""
    tm, tn, wtm, wtn = (config[k] for k in ("tm", "tn", "wtm", "wtn"))
    if min(tm, tn, wtm, wtn) <= 0 or tm % wtm or tn % wtn or wtm % 16 or wtn % 8:
        return False
    threads = mma_threads(config)
    if config.get("v4", 0) not in (0, 1) or (config.get("v4") and (threads > 4 * tn or threads % (tn // 4))):
        return False  # ONE4: whole quads of pairs a work item
    return (threads % tn == 0 and threads <= 16 * tn and (4 * tm) % threads == 0
            and threads <= min(1024, device.max_work_group) and 4 * (MMA_K // 2 + 4) * (tm + tn) <= device.local_memory)


def mma_defines(config, emulate: bool) -> tuple:
    return ("-DMMA",) + tuple(f"-D{k.upper()}={config[k]}" for k in ("tm", "tn", "wtm", "wtn")) + \
        (("-DONE4",) if config.get("v4") else ()) + (("-DMMA_EMULATE",) if emulate else ())


def mma_candidates(m, n, k, g, device, mode: str) -> list[dict]:
    """conv_mma configurations, best-scored first (_fill_score: padding waste, work
    groups for the device; K slices as split_for gives them)."""
    configs = []
    for tm, tn, wtm, wtn in MMA_TILES:
        base = mma_config(tm, tn, wtm, wtn)
        if not mma_valid(base, device):
            continue
        ks = split_for(dict(base, tk=MMA_K), m, n, k, g, device)
        configs.append(dict(base, ks=ks))
        if mode == "full":
            configs += [dict(base, ks=s) for s in (1, 2, 4, 8) if s != ks and k // s >= 2 * MMA_K]
    configs.sort(key=lambda c: -_fill_score(c, m, n, g, device))
    if mode == "1":
        return _unique(configs[:3] + [dict(c, ks=1) for c in configs[:2] if c["ks"] > 1])
    return _unique(configs)[:1 if mode == "default" else FULL_MAX]


BLOCK_LX = 32  # the lanes of a row of fc_block (a warp on NVIDIA)


def block_config(ny, opt, rb, kc=512) -> dict:
    return {"kernel": "block", "ny": ny, "opt": opt, "rb": rb, "kc": kc}


def block_local_floats(config) -> int:
    """fc_block's __local floats: the staged chunk of x, then the lanes' partial sums."""
    return max(config["rb"] * config["kc"], config["ny"] * config["opt"] * config["rb"] * (BLOCK_LX + 1))


def block_valid(config, device) -> bool:
    ny, opt, rb, kc = (config[k] for k in ("ny", "opt", "rb", "kc"))
    return (ny in (1, 2, 4, 8, 16) and 1 <= opt <= 16 and 1 <= rb <= 8 and kc in (128, 256, 512, 1024)
            and BLOCK_LX * ny <= min(256, device.max_work_group)
            and 4 * block_local_floats(config) <= device.local_memory)


def block_candidates(rows, inputs, outputs, device, mode: str) -> list[dict]:
    """fc_block configurations, heuristic first: up to 8 rows of the batch a pass
    over the weights, enough work groups for the device's compute units."""
    rb = 1
    while rb < min(rows, 8):
        rb *= 2
    grid = [(ny, opt) for ny in (4, 8, 2) for opt in (4, 2, 8, 1)]
    # the work groups a candidate makes, against two per compute unit
    fill = [min(1.0, -(-outputs // (ny * opt)) / (2.0 * device.compute_units)) for ny, opt in grid]
    order = sorted(range(len(grid)), key=lambda i: (-fill[i], -grid[i][0] * grid[i][1]))
    configs = [block_config(*grid[i], rb) for i in order]
    configs = [c for c in configs if block_valid(c, device)]
    if mode == "1":  # the two that fill the device best, the two that share x between the most outputs
        shared = sorted(configs, key=lambda c: -c["ny"] * c["opt"])
        return _unique(configs[:2] + shared[:2])
    if mode == "full":
        configs += [dict(c, kc=kc) for c in configs for kc in (256, 1024) if block_valid(dict(c, kc=kc), device)]
    return configs[:1] if mode == "default" else configs


def _unique(configs):
    seen, out = set(), []
    for c in configs:
        key = tuple(sorted(c.items()))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out
