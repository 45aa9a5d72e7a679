"""Softmax, LRN, Normalize, MVN, BatchNorm, GRN."""

from core.errors import FrameworkError
from core.front.caffe.extractors.common import layer_blobs
from core.front.extractor import FrontExtractorOp, embed_blobs
from core.ops.normalization import GRN, MVN, BatchNormalization, Norm, Normalize, SoftMax


class SoftmaxExtractor(FrontExtractorOp):
    op = "Softmax"

    @staticmethod
    def extract(node):
        SoftMax.update_node_stat(node, {"axis": int(node.pb.softmax_param.axis)})
        return True


class LRNExtractor(FrontExtractorOp):
    op = "LRN"

    @staticmethod
    def extract(node):
        p = node.pb.lrn_param
        Norm.update_node_stat(node, {"alpha": float(p.alpha), "beta": float(p.beta), "local-size": int(p.local_size),
                                     "region": "across" if p.norm_region == 0 else "same", "k": float(p.k)})
        return True


class NormalizeExtractor(FrontExtractorOp):
    op = "Normalize"

    @staticmethod
    def extract(node):
        p = node.pb.norm_param
        Normalize.update_node_stat(node, {"across_spatial": bool(p.across_spatial),
                                          "channel_shared": bool(p.channel_shared), "eps": float(p.eps)})
        embed_blobs(node, [("weights", layer_blobs(node, expected=1)[0].ravel())])
        return True


class MVNExtractor(FrontExtractorOp):
    op = "MVN"

    @staticmethod
    def extract(node):
        p = node.pb.mvn_param
        MVN.update_node_stat(node, {"across_channels": bool(p.across_channels),
                                    "normalize_variance": bool(p.normalize_variance), "eps": float(p.eps)})
        return True


class GRNExtractor(FrontExtractorOp):
    op = "GRN"

    @staticmethod
    def extract(node):
        GRN.update_node_stat(node, {"bias": float(node.pb.grn_param.bias)})
        return True


class BatchNormExtractor(FrontExtractorOp):
    op = "BatchNorm"

    @staticmethod
    def extract(node):
        p = node.pb.batch_norm_param
        if p.HasField("use_global_stats") and not p.use_global_stats:
            raise FrameworkError("BatchNorm '{}' has use_global_stats: false, i.e. it normalizes with the batch's "
                                 "own statistics (training mode). Set it to true for inference.", node.name)
        blobs = layer_blobs(node, at_least=3)
        factor = float(blobs[2].ravel()[0]) if blobs[2].size else 1.0
        scale = 0.0 if factor == 0 else 1.0 / factor  # Caffe stores running sums
        BatchNormalization.update_node_stat(node, {"epsilon": float(p.eps)})
        embed_blobs(node, [("mean", (blobs[0] * scale).ravel()), ("variance", (blobs[1] * scale).ravel())])
        return True
