from core.front.extractor import FrontExtractorOp
from core.ops.op import Op


class ThresholdFrontExtractor(FrontExtractorOp):
    op = "Threshold"
    enabled = True

    @staticmethod
    def extract(node):
        Op.get_op_class_by_name("Threshold").update_node_stat(
            node, {"threshold": node.pb.threshold_param.threshold})
        return True
