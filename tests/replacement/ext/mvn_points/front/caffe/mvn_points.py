# A replacement by points (the reference guide's SSD DetectionOutput case, smaller):
# the sub-graph between the start points (the two layers that read the block's
# input: the mean pooling and the centring Bias) and the end point (the final
# Scale) becomes one MVN layer. generate_sub_graph makes the new node,
# input_edges_match and output_edges_match connect it in place of the matched
# nodes, which the default replace_sub_graph then removes.
import logging as log

from core.front.replacement import FrontReplacementFromConfigFileSubGraph
from core.ops.normalization import MVN


class MVNByPoints(FrontReplacementFromConfigFileSubGraph):
    replacement_id = 'MVNByPoints'

    def generate_sub_graph(self, graph, match):
        log.debug('MVNByPoints: matched nodes {}'.format(match.matched_nodes_names()))
        attrs = dict(match.custom_replacement_desc.custom_attributes)
        mvn = MVN(graph, attrs).add_node(dict(name=match.output_node(0)[0].name + '/MVN_'))
        return {'mvn': mvn}

    def input_edges_match(self, graph, match, new_sub_graph):
        consumer, port = match.input_nodes(0)[0]   # the mean pooling: the tensor to normalize
        return {(consumer.id, port): 'mvn'}

    def output_edges_match(self, graph, match, new_sub_graph):
        return {match.output_node(0)[0].id: new_sub_graph['mvn'].id}
