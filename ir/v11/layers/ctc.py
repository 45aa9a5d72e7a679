"""CTCGreedyDecoder -> CTCGreedyDecoder-1: [T, N, C] probabilities and [T, N]
sequence indicators (all ones when the layer has none) -> [N, T, 1, 1]."""
from __future__ import annotations

import numpy as np

from .base import Mapping, maps


@maps("CTCGreedyDecoder")
def ctc_greedy_decoder(m: Mapping):
    x = m.inputs[0]
    if len(x.shape) < 3:
        raise m.attrs.error(f"needs [T, N, C] probabilities, got {list(x.shape)}")
    t, n = x.shape[0], x.shape[1]
    probs = m.reshape(x, (t, n, int(np.prod(x.shape[2:]))), "probabilities")
    if len(m.inputs) > 1:
        indicators = m.reshape(m.inputs[1], (t, n), "indicators")
    else:
        indicators = m.const(np.ones((t, n), np.float32), "indicators")
    attrs = {"ctc_merge_repeated": m.attrs["ctc_merge_repeated"]}
    return [m.op("CTCGreedyDecoder", [probs, indicators], m.out_dims(), attrs=attrs)]
