# The reference guide's extensions/front/caffe/python_proposal_ext.py with only its
# import lines changed (mo.* -> core.*).
import ast
from core.front.extractor import FrontExtractorOp
from core.ops.op import Op
class PythonProposalFrontExtractor(FrontExtractorOp):
    op = 'Python'
    enabled = True
    @staticmethod
    def extract(node):
        proto_layer = node.pb
        param = proto_layer.python_param
        attrs = PythonProposalFrontExtractor.parse_param_str(str(param.param_str))
        # update the attributes of the node
        Op.get_op_class_by_name(__class__.op).update_node_stat(node, attrs)
        return __class__.enabled
    @staticmethod
    def parse_param_str(param_str: str):
        if param_str[0] != '{' and param_str[-1] != '}':
            param_str = '{' + param_str + '}'
        return ast.literal_eval(param_str)
