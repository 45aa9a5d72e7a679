"""Device memory of a plan: tensors that share storage, and where each lives in
the per-request arena.

Every (layer, output port) is a slot. Slots that are the same bytes form a group:
a view (Reshape, Flatten) and a fused activation are their input's group, and an
in-place layer's output joins its input's group when nobody reads that group
afterwards. A group lives from the step that first writes it to the last step
that reads it (network inputs from before the first step, network outputs to the
end); groups whose lifetimes do not overlap share arena bytes. Placement is
greedy by size (largest first, lowest free offset), which is what TFLite's arena
planner does; offsets are aligned for sub-buffers (CL_DEVICE_MEM_BASE_ADDR_ALIGN).
"""
from __future__ import annotations

from dataclasses import dataclass


class Groups:
    """Union of slots into storage groups (a tiny union-find)."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, s: int) -> int:
        while self.parent[s] != s:
            self.parent[s] = self.parent[self.parent[s]]
            s = self.parent[s]
        return s

    def join(self, member: int, root: int):
        self.parent[self.find(member)] = self.find(root)


@dataclass
class Block:
    start: int   # first step that writes it (-1: a network input)
    end: int     # last step that reads it
    size: int    # bytes
    offset: int = 0


def align(value: int, alignment: int) -> int:
    return -(-int(value) // alignment) * alignment


def place(blocks: dict, alignment: int) -> int:
    """Sets each Block's offset; returns the arena size in bytes."""
    placed: list[Block] = []
    for block in sorted(blocks.values(), key=lambda b: (-b.size, b.start)):
        busy = sorted((b.offset, b.offset + b.size) for b in placed if b.start <= block.end and block.start <= b.end)
        offset = 0
        for lo, hi in busy:
            if offset + block.size <= lo:
                break
            offset = max(offset, align(hi, alignment))
        block.offset = offset
        placed.append(block)
    return max((b.offset + b.size for b in placed), default=0)
