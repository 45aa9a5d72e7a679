"""CTCGreedyDecoder."""
from core.front.extractor import FrontExtractorOp
from core.ops.ctc import CTCGreedyDecoder


class CTCGreedyDecoderExtractor(FrontExtractorOp):
    op = "CTCGreedyDecoder"

    @staticmethod
    def extract(node):
        CTCGreedyDecoder.update_node_stat(node, {"ctc_merge_repeated": bool(node.pb.ctc_decoder_param.ctc_merge_repeated)})
        return True
