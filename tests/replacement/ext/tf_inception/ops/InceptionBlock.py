# The reference guide's extension/ops/InceptionBlock.py with only its import lines
# changed. It has no shape function: the reference computed the block's output
# shapes with TensorFlow (the TF worker, mo-core issue 10).
import numpy as np

from core.graph.graph import Node
from core.ops.op import Op


class InceptionBlock(Op):
    op = "InceptionBlock"
    enabled = True

    def __init__(self, graph, attrs):
        super().__init__(graph, attrs, {
            'type': __class__.op,
            'op': __class__.op,
        })


assert np and Node  # imported as in the guide
