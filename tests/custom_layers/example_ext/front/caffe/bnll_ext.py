from core.front.extractor import FrontExtractorOp
from core.ops.op import Op


class BNLLFrontExtractor(FrontExtractorOp):
    op = "BNLL"
    enabled = True

    @staticmethod
    def extract(node):
        Op.get_op_class_by_name("BNLL").update_node_stat(node, {})
        return True
