"""Layers whose outputs are the same on every call, computed once per input shapes (as
OpenVINO folds them when it compiles a model): the prior boxes (PriorBox,
PriorBoxClustered read nothing but their inputs' shapes) and every built-in layer
that only such layers and constants feed (SSD's Concat of its priors). Without it,
every call ran them in Python and exported each feature map they read to numpy for
its shape alone (the SSD-style net, f32: 0.18 ms of reorders, 0.15 ms of priors).

    run_steps, folded = fold(plan.steps, plan.shapes, output_slots)

`run_steps`: the plan's steps, where a folded layer whose output a computed layer
(or the caller) reads becomes a step without inputs that hands out its value (a
copy each call: a consumer may compute in place) and other folded layers are gone;
`folded`: the layers gone (what `-pc` lists as not run). A layer whose kernel fails
while folding is left to fail as it would have, at run time; custom kernels and
layers with a state (Memory) never fold."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..plan_io import frees
from .kernels import KERNELS

SHAPE_ONLY = frozenset({"PriorBox", "PriorBoxClustered"})
NOTE = "constant for these input shapes: computed once when the plan was made"


class Folded:
    """The kernel of a folded layer that a computed layer reads: its values."""

    output_is_view = False
    note = NOTE

    def __init__(self, values: list):
        self.values = values

    def forward(self, inputs):
        return [value.copy() for value in self.values]


def _builtin(step) -> bool:
    """A built-in kernel without a state: its outputs depend on its inputs alone."""
    kernel = step.kernel
    return not step.is_custom and type(kernel) is KERNELS.get(step.layer.type) and not hasattr(kernel, "states")


def fold(steps: list, shapes: list, outputs: set) -> tuple[list, list]:
    """(steps to run, layers folded away); see the module doc."""
    values: dict[int, np.ndarray] = {}  # slot -> its constant value
    folded: set[int] = set()
    for i, step in enumerate(steps):
        shape_only = step.layer.type in SHAPE_ONLY
        if not _builtin(step) or not (shape_only or all(s in values for s in step.in_slots)):
            continue  # (a Const has no input: it folds)
        # a shape-only kernel reads placeholders of the right shapes (nothing stored), the
        # others copies of the constants (a kernel may compute in place)
        inputs = [values[s].copy() if s in values else np.broadcast_to(np.float32(0), shapes[s])
                  for s in step.in_slots]
        try:
            outs = step.kernel.forward(inputs)
        except Exception:  # noqa: BLE001 - it fails at run time, with the error the caller would get then
            continue
        if outs is None or len(outs) != len(step.out_slots):
            continue
        outs = [np.array(out, dtype=np.float32) for out in outs]
        if any(out.shape != shapes[s] for out, s in zip(outs, step.out_slots)):
            continue
        values.update(zip(step.out_slots, outs))
        folded.add(i)
    if not folded:
        return list(steps), []
    computed_reads = {s for i, step in enumerate(steps) if i not in folded for s in step.in_slots}
    run_steps, gone = [], []
    for i, step in enumerate(steps):
        if i not in folded:
            run_steps.append(step)
        elif any(s in computed_reads or s in outputs for s in step.out_slots):
            run_steps.append(replace(step, kernel=Folded([values[s] for s in step.out_slots]), in_slots=()))
        else:
            gone.append(step.layer)
    # (folding took readers away: the drops are counted again)
    dropped = frees([step.in_slots for step in run_steps], outputs)
    return [replace(step, free=free) for step, free in zip(run_steps, dropped)], gone
