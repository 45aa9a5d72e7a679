# The reference guide's extensions/front/tf/mvn.py. Changed besides the imports:
# - TensorFlow 2 writes FusedBatchNormV3 (the pattern accepts the three versions);
# - the batch norm's epsilon and data_format are read where mo-core's TF front end
#   keeps them (fbn.tf['epsilon'], the NodeDef's data_format attribute);
# - the per-channel product and sum with gamma and beta are mo-core's Mul and Add
#   (per-channel weights and biases, folded into a ScaleShift): an IR v2 Eltwise
#   multiplies tensors of one shape only, it does not broadcast gamma [C].
# - mo-core infers a TF graph's shapes twice (in TF's layout, then in the IR's after
#   lowering): the second time the reduction inputs are gone already.
# Note: the IR's MVN adds eps to the standard deviation (Caffe), TensorFlow's batch
# norm to the variance; with a small epsilon the two agree closely.
import logging as log

import numpy as np

from core.front.replacement import FrontReplacementSubgraph
from core.graph.graph import Node, create_edge, replace_node
from core.ops.op import Op


class MVN(FrontReplacementSubgraph):
    enabled = True

    def pattern(self):
        log.debug('Enabled MVN replacement')
        return dict(
            nodes=[
                ('mean', dict(op='Mean')),
                ('stop_grad', dict(op='StopGradient')),
                ('sqdiff', dict(op='SquaredDifference')),
                ('variance', dict(op='Mean')),
                ('squeeze_mean', dict(op='Squeeze')),
                ('squeeze_variance', dict(op='Squeeze')),
                ('fbn', dict(op=lambda op: op in ('FusedBatchNorm', 'FusedBatchNormV2', 'FusedBatchNormV3'))),
            ],
            edges=[
                ('mean', 'stop_grad', {'in': 0}),
                ('stop_grad', 'sqdiff', {'in': 1}),
                ('sqdiff', 'variance', {'in': 0}),
                ('mean', 'squeeze_mean', {'in': 0}),
                ('variance', 'squeeze_variance', {'in': 0}),
                ('squeeze_mean', 'fbn', {'in': 3}),
                ('squeeze_variance', 'fbn', {'in': 4}),
            ],
            node_attrs=['op'],
            edge_attrs=['in'])

    def replace_sub_graph(self, graph, match: dict):
        fbn = match['fbn']
        input = fbn.in_node(0)
        log.debug('Found potential MVN pattern after {} with name {}'.format(input.op, input.name))
        if input.id != match['mean'].in_node(0).id or input.id != match['sqdiff'].in_node(0).id:
            return
        log.debug('Confirmed MVN pattern after {} with name {}'.format(input.op, input.name))
        MVN = Op.get_op_class_by_name('MVN')
        mvn = MVN(graph, dict(
            name=fbn.name + '/MVN_',
            eps=fbn.tf['epsilon'],
            required_reduction_indices=[1, 2] if fbn.pb.attr['data_format'].s in (b'NHWC', b'') else [2, 3]
        ))
        mvn.attrs['old_infer'] = mvn.attrs['infer']
        mvn.attrs['infer'] = __class__.infer
        mul = Op.get_op_class_by_name('Mul')(graph, dict(name=fbn.name + '/Mul_'))
        add = Op.get_op_class_by_name('Add')(graph, dict(name=fbn.name + '/Add_'))
        input_gamma = fbn.in_node(1)
        input_beta = fbn.in_node(2)
        mean_reduction = match['mean'].in_node(1)
        variance_reduction = match['variance'].in_node(1)
        new_subgraph = add.create_node([mul.create_node([mvn.create_node([input, mean_reduction, variance_reduction])])])
        create_edge(input_gamma, new_subgraph.in_node(0), 0, 1, {'bin': 'weights'})
        create_edge(input_beta, new_subgraph, 0, 1, {'bin': 'biases'})
        replace_node(fbn, new_subgraph)

    @staticmethod
    def infer(node: Node):
        if not node.has_in(1):  # the IR-layout pass: the edges went in the first one
            return node.old_infer(node)
        if not (node.in_node(1).has_valid('value') and node.in_node(2).has_valid('value')):
            log.warning('Reduction indices for mean and variance for MVN node {} are not constants'.format(node.name))
            return
        if not (all(node.in_node(1).value == node.required_reduction_indices) and
                all(node.in_node(2).value == node.required_reduction_indices)):
            log.warning('Reduction indices for mean {} and variance {} do not match required ones {}'.format(
                node.in_node(1).value,
                node.in_node(2).value,
                node.required_reduction_indices
            ))
            return
        node.graph.remove_edge(node.in_node(1).id, node.id)
        node.graph.remove_edge(node.in_node(2).id, node.id)
        node.old_infer(node)


assert np  # the guide's file imports numpy too
