"""Convolution and Deconvolution layers (2-D, and Caffe's N-D form with three spatial axes)."""
import numpy as np

from core.front.caffe.extractors.common import layer_blobs, spatial, uniform_window
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
    windows = [attrs[a] for a in ("kernel", "stride", "pad", "dilation")]
    if any(len(w) == 3 for w in windows):  # Caffe's N-D convolution: one value stands for all three axes
        for name in ("kernel", "stride", "pad", "dilation"):
            if len(attrs[name]) == 2 and attrs[name][0] == attrs[name][1]:
                attrs[name] = np.repeat(attrs[name][:1], 3)
    attrs["window_from_input"] = uniform_window(param, ("kernel_size", "stride", "pad", "dilation"))
    return attrs


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
