"""Convolution and Deconvolution layers (2-D, and Caffe's N-D form with three spatial axes)."""
from core.front.caffe.extractors.common import layer_blobs, spatial, uniform_params
from core.front.extractor import FrontExtractorOp, embed_blobs
from core.ops.convolution import Convolution, Deconvolution


def conv_attrs(param):
    attrs = {
        "kernel": spatial(param, "kernel_size", "kernel_h", "kernel_w", 0),
        "stride": spatial(param, "stride", "stride_h", "stride_w", 1),
        "pad": spatial(param, "pad", "pad_h", "pad_w", 0),
        "dilation": spatial(param, "dilation", None, None, 1),
        "group": int(param.group),
        "output": int(param.num_output),
    }
    # Caffe's N-D form: a parameter of one value stands for every axis (core/ops/convolution.py check_rank)
    uniform = uniform_params(param, {"kernel_size": ("kernel_h", "kernel_w"), "stride": ("stride_h", "stride_w"),
                                     "pad": ("pad_h", "pad_w"), "dilation": ()})
    attrs["uniform_window"] = tuple(_ATTR[name] for name in uniform)
    return attrs


_ATTR = {"kernel_size": "kernel", "stride": "stride", "pad": "pad", "dilation": "dilation"}


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
