"""Sub-graphs the compiler runs as one oneDNN step, found on the plan's steps before
ops are made (`find(steps, ...)`), so that the blocks of mobile networks stay in
oneDNN's blocked layout:

- gated activations, x * g(x) with g a chain of element-wise layers on x alone:
  hard-swish (g = clip(a*x + b, 0, c): TensorFlow's x * relu6(x + 3) / 6, as Keras
  MobileNetV3 writes it: ScaleShift, Clamp, ScaleShift, Eltwise mul) and swish
  (g = sigmoid(a*x)). The Eltwise becomes one eltwise step on x (then a post-op of
  x's producer, like any activation) and the chain's layers are fused into it.
- broadcast Eltwise: an Eltwise of two inputs one of which is a chain of Tile layers
  that only repeats a tensor along its unit axes (our TensorFlow front end's
  broadcast; squeeze-excite's [N, C, 1, 1] gate times [N, C, H, W]): a binary
  primitive reads the small tensor broadcast, and the Tiles are fused into it.

A step is a dataclass (plan._Step); rewritten ones are copies with other inputs.
"""
from __future__ import annotations

import dataclasses
import math

from .eltwise import unary_post_ops


@dataclasses.dataclass
class Rewrite:
    ops: dict          # step index -> ("activation", post-ops) | ("broadcast",): the op to make for it
    absorbed: dict     # step index -> the step index it is computed in


def find(steps, shapes, outputs, consumers) -> tuple[list, Rewrite]:
    """(the steps with rewritten inputs, what was rewritten); outputs: the network's
    output slots (never absorbed); consumers: slot -> [step index]."""
    steps = list(steps)
    producer = {s: i for i, step in enumerate(steps) for s in step.out_slots}
    rewrite = Rewrite({}, {})

    def sole_reader(slot, reader):
        return slot not in outputs and consumers.get(slot) == [reader]

    for e, step in enumerate(steps):
        if step.layer.type != "Eltwise" or step.is_custom or len(step.in_slots) != 2 or len(step.out_slots) != 1:
            continue
        kernel = step.kernel
        if kernel.op == "mul" and step.in_slots[0] != step.in_slots[1]:
            gated = _gated(steps, producer, sole_reader, e, step, shapes)
            if gated is not None:
                x, chain, ops = gated
                steps[e] = dataclasses.replace(step, in_slots=(x,))
                rewrite.ops[e] = ("activation", ops)
                rewrite.absorbed.update({k: e for k in chain})
                continue
        if kernel.coeff is None or all(c == 1.0 for c in kernel.coeff):
            tiled = _broadcast(steps, producer, sole_reader, e, step, shapes)
            if tiled is not None:
                full, small, chain = tiled
                steps[e] = dataclasses.replace(step, in_slots=(full, small))
                rewrite.ops[e] = ("broadcast",)
                rewrite.absorbed.update({k: e for k in chain})
    return steps, rewrite


def _gated(steps, producer, sole_reader, e, step, shapes):
    """(x, chain, post-ops) when the Eltwise mul at e computes x * g(x) for a gate g
    that oneDNN has as one eltwise algorithm (hard-swish, swish)."""
    for x, gate in (step.in_slots, step.in_slots[::-1]):
        found = _walk(steps, producer, sole_reader, gate, e, x, shapes)
        if found is None:
            continue
        ops = _gate_ops([op for k in found for op in unary_post_ops(steps[k], shapes[x])])
        if ops is not None:
            return x, found, ops
    return None


def _walk(steps, producer, sole_reader, slot, reader, x, shapes):
    """The element-wise layers from x to `slot` (each read only by the next), or None."""
    chain = []
    while slot != x:
        k = producer.get(slot)
        if k is None or not sole_reader(slot, reader) or len(chain) > 8:
            return None
        s = steps[k]
        if len(s.in_slots) != 1 or len(s.out_slots) != 1 or s.is_custom or not unary_post_ops(s, shapes[s.in_slots[0]]):
            return None
        chain.insert(0, k)
        slot, reader = s.in_slots[0], k
    return chain or None


def _gate_ops(ops) -> list | None:
    """x * g(x) as eltwise post-ops, for g the composition of `ops`: hard-swish when g
    is clip(a*x + b, 0, c) (times c when c != 1), swish when g is sigmoid(a*x)."""
    if any(op[0] != "eltwise" for op in ops):
        return None
    if [op[1] for op in ops] in (["logistic"], ["linear", "logistic"]):
        scale = ops[0][2] if len(ops) == 2 else 1.0
        if len(ops) == 2 and ops[0][3] != 0.0:
            return None
        return [("eltwise", "swish", scale, 0.0)]
    a, b, lo, hi = 1.0, 0.0, -math.inf, math.inf  # g(x) = clip(a*x + b, lo, hi)
    for _, alg, alpha, beta in ops:
        if alg == "linear" and alpha > 0:
            a, b, lo, hi = a * alpha, b * alpha + beta, lo * alpha + beta, hi * alpha + beta
        elif alg == "clip_v2" or (alg == "relu" and alpha == 0.0):
            new_lo, new_hi = (alpha, beta) if alg == "clip_v2" else (0.0, math.inf)
            lo, hi = max(lo, new_lo), min(hi, new_hi)
            if lo >= hi:
                return None
        else:
            return None
    if lo != 0.0 or not 0 < hi < math.inf:
        return None
    ops = [("eltwise", "hardswish", a / hi, b / hi)]
    return ops if hi == 1.0 else ops + [("eltwise", "linear", hi, 0.0)]


def _broadcast(steps, producer, sole_reader, e, step, shapes):
    """(the full input, the small one, the Tile steps) when one input of the Eltwise at e
    is a chain of Tiles that repeats the small tensor along its unit axes only."""
    out = shapes[step.out_slots[0]]
    for full, tiled in (step.in_slots, step.in_slots[::-1]):
        if shapes[full] != out:
            continue
        chain, slot, reader = [], tiled, e
        while True:
            k = producer.get(slot)
            if k is None or steps[k].layer.type != "Tile" or steps[k].is_custom or not sole_reader(slot, reader):
                break
            chain.insert(0, k)
            slot, reader = steps[k].in_slots[0], k
        small = shapes[slot]
        if chain and len(small) == len(out) and all(s in (1, o) for s, o in zip(small, out)) and small != out:
            return full, slot, chain
    return None
