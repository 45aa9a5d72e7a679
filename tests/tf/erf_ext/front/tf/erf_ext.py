"""Extractor of TensorFlow's Erf op: it has no attributes to read."""
from core.front.extractor import FrontExtractorOp
from core.ops.op import Op


class ErfExtractor(FrontExtractorOp):
    op = "Erf"
    enabled = True

    @staticmethod
    def extract(node):
        Op.get_op_class_by_name("Erf").update_node_stat(node, {})
        return True
