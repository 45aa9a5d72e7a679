# The reference guide's extensions/ops/python_proposal.py with only its import
# lines changed (mo.* -> core.*).
import numpy as np
from core.graph.graph import Node
from core.ops.op import Op
class PythonProposalOp(Op):
    op = 'Python'
    def __init__(self, graph, attrs):
        mandatory_props = {
            'type': __class__.op,
            'op': __class__.op,
            'feat_stride': 16,
            'base_size': 16,
            'min_size': 16,
            'ratio': [0.5, 1, 2],
            'scale': [8, 16, 32],
            'pre_nms_topn': 6000,
            'post_nms_topn': 300,
            'nms_thresh': 0.7,
            'infer': PythonProposalOp.calculate_output_shape
        }
        super().__init__(graph, mandatory_props, attrs)
    def supported_attrs(self):
        return [
            'pre_nms_topn',
            'post_nms_topn',
            'nms_thresh',
            'feat_stride',
            'min_size',
            'base_size',
            'ratio',
            'scale'
        ]
    def backend_attrs(self) -> list:
        """
        Gets list of attributes that should appear in resulting IR
        Returns:
            list of attributes names or list of tuples (name of attribute, pre-processing rule)
        """
        return [
            (  # a tuple per attribute
                'ratio',  # name of attribute
                # pre-processing rule in a form of lambda
                # lambda takes a PythonProposalOp node with all defined properties
                # it translates [1,2,3] -> "1,2,3"
                lambda node: ','.join(map(str, node['ratio']))
            ),
            (
                'scale',
                lambda node: ','.join(map(str, node['scale']))
            ),
            'feat_stride',
            'base_size',
            'min_size',
            'pre_nms_topn',
            'post_nms_topn',
            'nms_thresh'
        ]
    @staticmethod
    def calculate_output_shape(node: Node):
        input_shape = node.in_node(0).shape
        out_shape = np.array([0, 0], dtype=np.int64)
        # rois blob: holds R regions of interest, each is a 5 - tuple
        # (n, x1, y1, x2, y2) specifying an image batch index n and a
        # rectangle(x1, y1, x2, y2)
        out_shape[0] = input_shape[0] * node.post_nms_topn
        out_shape[1] = 5
        node.out_node(0).shape = out_shape
