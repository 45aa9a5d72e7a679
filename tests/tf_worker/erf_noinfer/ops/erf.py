"""A user op for TensorFlow's Erf with no shape function: TensorFlow computes its
shapes (the TF worker's fallback). The IR keeps type Erf (CPU kernel:
tests/tf/erf_ext/erf_kernel.py)."""
from core.ops.op import Op


class ErfWithoutInfer(Op):
    op = "Erf"

    def __init__(self, graph, attrs):
        super().__init__(graph, {"type": "Erf", "op": self.op}, attrs)
