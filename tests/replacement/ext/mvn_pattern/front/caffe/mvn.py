# The reference guide's MVN replacer (extensions/front/tf/mvn.py), for the same
# normalization spelled out in Caffe layers: global average pooling for the mean,
# Power(scale=-1) and a two-bottom Bias to centre, Power(2) and pooling for the
# variance, Power(0.5), Power(shift=eps), Power(-1) and a two-bottom Scale. As in
# the guide, the pattern is matched by networkx's isomorphism matcher, the last node
# is replaced with replace_node, and dead code elimination removes the rest.
import logging as log

from core.front.replacement import FrontReplacementSubgraph
from core.graph.graph import replace_node
from core.ops.op import Op

AVG_POOL = {'op': 'Pooling', 'pool-method': 'avg', 'global_pool': True}


class MVN(FrontReplacementSubgraph):
    enabled = True

    def pattern(self):
        log.debug('Enabled MVN replacement')
        return dict(
            nodes=[
                ('mean', dict(AVG_POOL)),
                ('mean_flat', dict(op='Reshape')),
                ('negate', dict(op='Power', power=1.0, scale=-1.0, shift=0.0)),
                ('centered', dict(op='Eltwise', operation='sum')),
                ('square', dict(op='Power', power=2.0, scale=1.0, shift=0.0)),
                ('variance', dict(AVG_POOL)),
                ('variance_flat', dict(op='Reshape')),
                ('std', dict(op='Power', power=0.5, scale=1.0, shift=0.0)),
                ('std_eps', dict(op='Power', power=1.0, scale=1.0, shift=lambda eps: 0 < eps < 1e-2)),
                ('inv_std', dict(op='Power', power=-1.0, scale=1.0, shift=0.0)),
                ('normalized', dict(op='Eltwise', operation='mul')),
            ],
            edges=[
                ('mean', 'mean_flat', {'in': 0}),
                ('mean_flat', 'negate', {'in': 0}),
                ('negate', 'centered', {'in': 1}),
                ('centered', 'square', {'in': 0}),
                ('square', 'variance', {'in': 0}),
                ('variance', 'variance_flat', {'in': 0}),
                ('variance_flat', 'std', {'in': 0}),
                ('std', 'std_eps', {'in': 0}),
                ('std_eps', 'inv_std', {'in': 0}),
                ('centered', 'normalized', {'in': 0}),
                ('inv_std', 'normalized', {'in': 1}),
            ])

    def replace_sub_graph(self, graph, match: dict):
        normalized = match['normalized']
        input = match['centered'].in_node(0)
        log.debug('Found potential MVN pattern after {} with name {}'.format(input.op, input.name))
        if input.id != match['mean'].in_node(0).id:
            return
        log.debug('Confirmed MVN pattern after {} with name {}'.format(input.op, input.name))
        MVN = Op.get_op_class_by_name('MVN')
        mvn = MVN(graph, dict(
            name=normalized.name + '/MVN_',
            eps=match['std_eps'].shift,
            across_channels=False,
            normalize_variance=True,
        ))
        replace_node(normalized, mvn.create_node([input]))
