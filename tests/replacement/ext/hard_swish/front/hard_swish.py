# The reference guide's SquaredDifference example (extensions/front/SquaredDifference.py)
# for a layer this converter does not know: brocolli-Caffe's HardSwish,
# x * ReLU6(x + 3) / 6, replaced by Power(shift=3), Clamp(0, 6), Power(scale=1/6)
# and an Eltwise product, all of them layers the converter and the daemons know.
# It sits in front/ (not front/caffe/), so it would apply to any framework.
import networkx as nx

from core.front.replacement import FrontReplacementOp
from core.graph.graph import Node
from core.ops.activation import Clamp, Power
from core.ops.linear import Eltwise


class HardSwish(FrontReplacementOp):
    """
    Example class illustrating how to implement replacement of a single op in the front-end of the MO pipeline.
    This class replaces a single op HardSwish by a sub-graph consisting of 4 lower-level ops.
    """
    op = "HardSwish"
    enabled = True

    def replace_op(self, graph: nx.MultiDiGraph, node: Node):
        shift = Power(graph, dict(shift=3.0, name=node.name + '/shift_'))
        relu6 = Clamp(graph, dict(min=0.0, max=6.0, name=node.name + '/relu6_'))
        scale = Power(graph, dict(scale=1.0 / 6.0, name=node.name + '/scale_'))
        mul = Eltwise(graph, dict(operation='mul', name=node.name + '/mul_'))
        out_node = mul.create_node([node.in_node(0),
                                    scale.create_node([relu6.create_node([shift.create_node([node.in_node(0)])])])])
        # Replace edge from out port 0 of the matched node with a edge from node out_node.id with port 0.
        # The "explicit" version of the return value is: [(out_node.id, 0)])
        return [out_node.id]
