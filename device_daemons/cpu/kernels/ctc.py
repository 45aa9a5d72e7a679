"""CTCGreedyDecoder: best path decoding of [T, N, C] class probabilities.

For each sequence n: at each step t (until the sequence indicator input [T, N]
is 0) take the most probable class; drop the blank (the last class, C-1) and,
with ctc_merge_repeated, a class equal to the previous step's. Output [N, T, 1, 1]
of class indices, the rest of each row -1.
"""
from __future__ import annotations

import numpy as np

from .base import Kernel, register


@register("CTCGreedyDecoder")
class CTCGreedyDecoder(Kernel):
    def __init__(self, layer):
        super().__init__(layer)
        self.merge_repeated = self.attrs["ctc_merge_repeated"]

    def getMemoryShapes(self, input_shapes):  # noqa: N802
        self.expect_inputs(input_shapes, (1, 2))
        shape = input_shapes[0]
        if len(shape) < 3:
            raise self.error(f"needs [T, N, C] probabilities, got {list(shape)}")
        t, n = shape[0], shape[1]
        if len(input_shapes) > 1 and int(np.prod(input_shapes[1])) != t * n:
            raise self.error(f"sequence indicators {list(input_shapes[1])} do not match T={t}, N={n}")
        return [(n, t, 1, 1)]

    def forward(self, inputs):
        probs = inputs[0]
        t, n = probs.shape[0], probs.shape[1]
        probs = probs.reshape(t, n, -1)
        blank = probs.shape[2] - 1
        best = probs.argmax(axis=2)  # (T, N)
        if len(inputs) > 1:
            ind = inputs[1].reshape(t, n)
            # a sequence ends at its first 0 indicator
            valid = np.cumprod(ind != 0, axis=0).astype(bool)
        else:
            valid = np.ones((t, n), bool)
        prev = np.vstack([np.full((1, n), -1), best[:-1]])
        keep = valid & (best != blank)
        if self.merge_repeated:
            keep &= best != prev
        out = np.full((n, t), -1.0, np.float32)
        for i in range(n):
            labels = best[keep[:, i], i]
            out[i, :len(labels)] = labels
        return [out.reshape(n, t, 1, 1)]
