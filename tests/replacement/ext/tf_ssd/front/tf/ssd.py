# The reference guide's PostprocessorReplacement (extensions/front/tf/SSDs.py, as the
# guide shows it): the Postprocessor sub-graph between the start points (locations,
# confidences, anchors) and the end points becomes Softmax + Reshapes + one
# DetectionOutput. As in the guide, the anchors reach DetectionOutput as they are
# and its infer function turns them into the IE layout [1, 2, P * 4] with the
# variances (this model's anchors are already x-first: no YXYX swap). `nchw_layout`
# marks the new nodes' outputs as IR layout already (DetectionOutput's [1, 1, N, 7]
# is no NHWC image), as the guide's Softmax has it.
import logging as log

import numpy as np

from core.errors import Error
from core.front.replacement import FrontReplacementFromConfigFileSubGraph, SubgraphMatch
from core.graph.graph import create_edge
from core.ops.detection import DetectionOutput
from core.ops.normalization import SoftMax
from core.ops.shape_ops import Reshape


class PostprocessorReplacement(FrontReplacementFromConfigFileSubGraph):
    replacement_id = 'TFObjectDetectionAPIDetectionOutput'

    def generate_sub_graph(self, graph, match: SubgraphMatch):
        log.debug('PostprocessorReplacement.generate_sub_graph')
        log.debug('matched_nodes = {}'.format(match.matched_nodes_names()))
        # softmax to be applied to the confidence
        softmax_conf_op = SoftMax(graph, {'axis': 2, 'nchw_layout': True})
        softmax_conf_node = softmax_conf_op.add_node(dict(name='DetectionOutput_SoftMax_conf_'))
        # Inference Engine DetectionOutput layer consumes flattened tensors
        # reshape operation to flatten locations tensor
        reshape_loc_op = Reshape(graph, {'dim': np.array([0, -1])})
        reshape_loc_node = reshape_loc_op.add_node(dict(name='DetectionOutput_Reshape_loc_'))
        # Inference Engine DetectionOutput layer consumes flattened tensors
        # reshape operation to flatten confidence tensor
        reshape_conf_op = Reshape(graph, {'dim': np.array([0, -1])})
        reshape_conf_node = reshape_conf_op.add_node(dict(name='DetectionOutput_Reshape_conf_'))
        # create Node object from Op class
        detection_output_op = DetectionOutput(graph, dict(match.custom_replacement_desc.custom_attributes,
                                                          nchw_layout=True))
        detection_output_op.attrs['old_infer'] = detection_output_op.attrs['infer']
        detection_output_op.attrs['infer'] = __class__.do_infer
        detection_output_node = detection_output_op.add_node(dict(name=detection_output_op.attrs['type'] + '_'))
        # create internal edges of the sub-graph. In this case we add edges to connect input port 0 and 1 of the
        # detection output with output of reshape of locations and reshape of confidence
        create_edge(softmax_conf_node, reshape_conf_node, 0, 0)
        create_edge(reshape_loc_node, detection_output_node, 0, 0)
        create_edge(reshape_conf_node, detection_output_node, 0, 1)
        return {'detection_output_node': detection_output_node, 'reshape_conf_node': softmax_conf_node,
                'reshape_loc_node': reshape_loc_node}

    def input_edges_match(self, graph, match: SubgraphMatch, new_sub_graph: dict):
        locs_consumer_node, locs_consumer_node_port = match.input_nodes(0)[0]
        conf_consumer_node, conf_consumer_node_port = match.input_nodes(1)[0]
        priors_consumer_node, priors_consumer_node_port = match.input_nodes(2)[0]
        # create matching nodes for locations and confidence tensors using simple scheme "old_node_name: new_node_name"
        # which in fact means "(old_node_name, 0): (new_node_name, 0)", while first '0' means old_port and the second
        # zero defines 'new_port'.
        return {locs_consumer_node.id: new_sub_graph['reshape_loc_node'].id,
                conf_consumer_node.id: new_sub_graph['reshape_conf_node'].id,
                priors_consumer_node.id: (new_sub_graph['detection_output_node'].id, 2),
                }

    def output_edges_match(self, graph, match: SubgraphMatch, new_sub_graph: dict):
        # the DetectionOutput in IE produces single tensor, but in TF it produces two tensors, so we need to create only
        # one output edge match
        return {match.output_node(0)[0].id: new_sub_graph['detection_output_node'].id}

    @staticmethod
    def do_infer(node):
        prior = node.in_node(2)
        if prior.value is not None and len(prior.value.shape) == 2:  # the anchors as TF has them: [P, 4]
            prior_boxes = prior.value.reshape([-1, 4])
            variances = np.tile(np.array([[0.1, 0.1, 0.2, 0.2]], np.float32), [prior_boxes.shape[0], 1])
            prior_boxes = np.concatenate((prior_boxes, variances), 0).reshape((1, 2, -1)).astype(np.float32)
            prior.value = prior_boxes
            prior.shape = np.array(prior_boxes.shape, dtype=np.int64)
        elif len(prior.shape) != 3:
            raise Error("DetectionOutput '{}' needs constant anchors as its third input.", node.name)
        node.old_infer(node)
