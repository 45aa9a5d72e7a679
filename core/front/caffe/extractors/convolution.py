"""Convolution and Deconvolution layers."""
from core.front.caffe.extractors.common import layer_blobs, spatial
from core.front.extractor import FrontExtractorOp, embed_blobs
from core.ops.convolution import Convolution, Deconvolution


def conv_attrs(param):
    return {
        "kernel": spatial(param, "kernel_size", "kernel_h", "kernel_w", 0),
        "stride": spatial(param, "stride", "stride_h", "stride_w", 1),
        "pad": spatial(param, "pad", "pad_h", "pad_w", 0),
        "dilation": spatial(param, "dilation", None, None, 1),
        "group": int(param.group),
        "output": int(param.num_output),
    }


def _extract(node, op_class):
    param = node.pb.convolution_param
    op_class.update_node_stat(node, conv_attrs(param))
    blobs = layer_blobs(node, expected=2 if param.bias_term else 1)
    embed_blobs(node, [("weights", blobs[0].ravel()), ("biases", blobs[1].ravel() if param.bias_term else None)])
    return True


class ConvolutionExtractor(FrontExtractorOp):
    op = "Convolution"

    @staticmethod
    def extract(node):
        return _extract(node, Convolution)


class DeconvolutionExtractor(FrontExtractorOp):
    op = "Deconvolution"

    @staticmethod
    def extract(node):
        return _extract(node, Deconvolution)
