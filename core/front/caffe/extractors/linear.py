"""Scale, Bias, Eltwise."""
import numpy as np

from core.errors import FrameworkError
from core.front.caffe.extractors.common import layer_blobs
from core.front.extractor import FrontExtractorOp, embed_blobs
from core.ops.linear import Eltwise, ScaleShift


def _check_channel_axis(node, param):
    if param.axis != 1 or param.num_axes != 1:
        raise FrameworkError("{} '{}' scales along axis {} over {} axes; only the channel axis (axis: 1, "
                             "num_axes: 1) maps to an IR ScaleShift.", node.caffe_type, node.name, param.axis,
                             param.num_axes)


class ScaleExtractor(FrontExtractorOp):
    op = "Scale"

    @staticmethod
    def extract(node):
        param = node.pb.scale_param
        if len(node.pb.bottom) == 2:  # the scale is a second input, not a blob, broadcast from `axis`
            Eltwise.update_node_stat(node, {"operation": "mul", "caffe_axis": int(param.axis)})
            return True
        _check_channel_axis(node, param)
        blobs = layer_blobs(node, expected=2 if param.bias_term else 1)
        scale = blobs[0].ravel()
        bias = blobs[1].ravel() if param.bias_term else np.zeros_like(scale)
        ScaleShift.update_node_stat(node, {})
        embed_blobs(node, [("weights", scale), ("biases", bias)])
        return True


class BiasExtractor(FrontExtractorOp):
    op = "Bias"

    @staticmethod
    def extract(node):
        param = node.pb.bias_param
        if len(node.pb.bottom) == 2:  # the bias is a second input, broadcast from `axis`
            Eltwise.update_node_stat(node, {"operation": "sum", "caffe_axis": int(param.axis)})
            return True
        _check_channel_axis(node, param)
        bias = layer_blobs(node, expected=1)[0].ravel()
        ScaleShift.update_node_stat(node, {})
        embed_blobs(node, [("weights", np.ones_like(bias)), ("biases", bias)])
        return True


class EltwiseExtractor(FrontExtractorOp):
    op = "Eltwise"

    @staticmethod
    def extract(node):
        p = node.pb.eltwise_param
        operation = {0: "mul", 1: "sum", 2: "max"}[p.operation]
        coeff = [float(c) for c in p.coeff]
        if coeff and operation != "sum":
            raise FrameworkError("Eltwise '{}' has coefficients, which Caffe only allows for SUM.", node.name)
        attrs = {"operation": operation}
        if coeff and any(c != 1.0 for c in coeff):
            attrs["coeff"] = coeff
        Eltwise.update_node_stat(node, attrs)
        return True
