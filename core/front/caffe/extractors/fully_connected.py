"""InnerProduct -> FullyConnected."""
from core.front.caffe.extractors.common import layer_blobs
from core.front.extractor import FrontExtractorOp, embed_blobs
from core.ops.fully_connected import FullyConnected


class InnerProductExtractor(FrontExtractorOp):
    op = "InnerProduct"

    @staticmethod
    def extract(node):
        param = node.pb.inner_product_param
        FullyConnected.update_node_stat(node, {"out-size": int(param.num_output), "axis": int(param.axis)})
        blobs = layer_blobs(node, expected=2 if param.bias_term else 1)
        weights = blobs[0].reshape(-1, blobs[0].shape[-1]) if blobs[0].ndim >= 2 else blobs[0]
        if param.transpose:  # stored as (in, out): the IR wants OI
            weights = weights.T
        embed_blobs(node, [("weights", weights.ravel()), ("biases", blobs[1].ravel() if param.bias_term else None)])
        return True
