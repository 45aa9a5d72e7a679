"""Pad (own type) -> Pad-12: constant (pad_value), reflect or symmetric padding."""
from __future__ import annotations

import numpy as np

from .base import Mapping, maps


@maps("Pad")
def pad(m: Mapping):
    a = m.attrs
    x = m.inputs[0]
    if not len(a["pads_begin"]) == len(a["pads_end"]) == len(x.shape):
        raise a.error(f"pads_begin {a['pads_begin']} and pads_end {a['pads_end']} must have one value per axis of "
                      f"the input {list(x.shape)}")
    inputs = [x, m.ints(a["pads_begin"], "pads_begin"), m.ints(a["pads_end"], "pads_end")]
    if a["pad_mode"] == "constant":
        inputs.append(m.const(np.float32(a["pad_value"]), "pad_value"))
    return [m.op("Pad", inputs, m.out_dims(), version="opset12", attrs={"pad_mode": a["pad_mode"]})]
