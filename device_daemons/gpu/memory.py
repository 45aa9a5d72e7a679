"""Device memory of a plan: tensors that share storage, and which device buffer
of a request each lives in.

Every (layer, output port) is a slot. Slots that are the same bytes form a group:
a view (Reshape, Flatten) and a fused activation are their input's group, and an
in-place layer's output joins its input's group when nobody reads that group
afterwards. A group lives from the step that first writes it to the last step
that reads it (network inputs from before the first step, network outputs to the
end); groups whose lifetimes do not overlap share a buffer. Assignment is greedy
by size (largest first, into the first buffer free for its whole lifetime), so a
buffer's size is its first group's.

Whole buffers, not sub-buffers of one arena: in the H200 profile of the first
round (NVIDIA's driver 580) a kernel on sub-buffers of the arena took up to 8x the
time the tuner measured for it on buffers of its own (0.18 ms for a 20 us
convolution), the excess growing with the bytes other sub-buffers had written
(split-K partial sums, the first reader of a Concat's output, the first layer
after the upload): the likely cause, which the device check's sub-buffer probe
measures. Nothing needs an offset into another tensor's storage: a Concat's
producers get the Concat's buffer and their element offset.
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
    buffer: int = 0  # which of the request's buffers (assign_buffers)


def align(value: int, alignment: int) -> int:
    return -(-int(value) // alignment) * alignment


def assign_buffers(blocks: dict) -> list[int]:
    """Sets each Block's buffer; returns the buffers' sizes in bytes."""
    sizes: list[int] = []
    tenants: list[list[Block]] = []
    for block in sorted(blocks.values(), key=lambda b: (-b.size, b.start)):
        for index, placed in enumerate(tenants):
            if all(b.end < block.start or block.end < b.start for b in placed):
                break
        else:
            index = len(sizes)
            sizes.append(block.size)
            tenants.append([])
        block.buffer = index
        tenants[index].append(block)
    return sizes
