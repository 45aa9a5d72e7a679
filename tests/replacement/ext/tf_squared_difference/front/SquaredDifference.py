# The reference guide's extensions/front/SquaredDifference.py with only its import
# lines changed (mo.* -> core.*).
import networkx as nx

from core.front.replacement import FrontReplacementOp
from core.graph.graph import Node
from core.ops.linear import Eltwise
from core.ops.activation import Power


class SquaredDifference(FrontReplacementOp):
    """
    Example class illustrating how to implement replacement of a single op in the front-end of the MO pipeline.
    This class replaces a single op SquaredDifference by a sub-graph consisting of 3 lower-level ops.
    """
    op = "SquaredDifference"
    enabled = True

    def replace_op(self, graph: nx.MultiDiGraph, node: Node):
        negate = Power(graph, dict(scale=-1, name=node.name + '/negate_'))
        add = Eltwise(graph, dict(operation='sum', name=node.name + '/add_'))
        squared = Power(graph, dict(power=2, name=node.name + '/squared_'))
        out_node = squared.create_node([add.create_node([node.in_node(0), negate.create_node([node.in_node(1)])])])
        # Replace edge from out port 0 of the matched node with a edge from node out_node.id with port 0.
        # The "explicit" version of the return value is: [(out_node.id, 0)])
        return [out_node.id]
