"""ArgMax."""
from core.front.extractor import FrontExtractorOp
from core.ops.argmax import ArgMax


class ArgMaxExtractor(FrontExtractorOp):
    op = "ArgMax"

    @staticmethod
    def extract(node):
        p = node.pb.argmax_param
        attrs = {"top_k": int(p.top_k), "out_max_val": bool(p.out_max_val)}
        if p.HasField("axis"):
            attrs["axis"] = int(p.axis)
        ArgMax.update_node_stat(node, attrs)
        return True
