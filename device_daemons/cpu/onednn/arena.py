"""Static memory planning: every native tensor of a program gets an offset in one
buffer (the arena), tensors alive at the same step never overlap. Greedy by size
(largest first), each at the lowest offset free for its whole lifetime, which is
the usual heuristic of inference runtimes: the arena ends close to the peak of
live activations instead of their sum."""
from __future__ import annotations

ALIGN = 64


def _up(value: int) -> int:
    return -(-value // ALIGN) * ALIGN


def place(tensors) -> int:
    """Sets `.offset` of each tensor (attributes size, first, last: step indices,
    inclusive) and returns the arena size in bytes."""
    placed = []
    total = 0
    for t in sorted(tensors, key=lambda t: (-t.size, t.first)):
        live = sorted((p for p in placed if p.first <= t.last and t.first <= p.last), key=lambda p: p.offset)
        offset = 0
        for p in live:
            if offset + t.size <= p.offset:
                break
            offset = max(offset, _up(p.offset + p.size))
        t.offset = offset
        placed.append(t)
        total = max(total, _up(offset + t.size))
    return total
