"""A topological order that keeps a given order wherever the dependencies allow it
(the smallest ready index first): IR layers stay in file order, front replacers
in their default order."""
from __future__ import annotations

import heapq


def stable_topological_order(successors: list[list[int]]) -> tuple[list[int], list[int]]:
    """Indices 0..n-1 ordered so that i comes before every j in successors[i].
    Returns (order, waiting): with a cycle the order is short, and waiting[j] > 0
    for every index in or behind it."""
    waiting = [0] * len(successors)
    for following in successors:
        for j in following:
            waiting[j] += 1
    ready = [i for i, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in successors[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    return order, waiting
