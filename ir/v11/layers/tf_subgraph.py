"""TFCustomSubgraphCall (a TensorFlow sub-graph the converter offloaded) has no
opset equivalent: TensorFlow itself runs it, through the CPU daemon's TF worker,
so only IR version 2 holds it."""
from __future__ import annotations

from .base import Mapping, Unmappable, maps


@maps("TFCustomSubgraphCall")
def tf_custom_subgraph_call(m: Mapping):
    raise Unmappable("a TensorFlow sub-graph that TensorFlow runs (the CPU daemon's TF worker, IR version 2)")
