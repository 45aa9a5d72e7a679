"""ReLU, ReLU6, PReLU, ELU, Sigmoid, TanH, AbsVal, Power."""
from core.front.caffe.extractors.common import layer_blobs
from core.front.extractor import FrontExtractorOp, embed_blobs
from core.ops.activation import Activation, Clamp, Power, PReLU, ReLU


class ReLUExtractor(FrontExtractorOp):
    op = "ReLU"

    @staticmethod
    def extract(node):
        ReLU.update_node_stat(node, {"negative_slope": float(node.pb.relu_param.negative_slope)})
        return True


class ReLU6Extractor(FrontExtractorOp):
    op = "ReLU6"

    @staticmethod
    def extract(node):
        Clamp.update_node_stat(node, {"min": 0.0, "max": 6.0})
        return True


class PReLUExtractor(FrontExtractorOp):
    op = "PReLU"

    @staticmethod
    def extract(node):
        PReLU.update_node_stat(node, {"channel_shared": bool(node.pb.prelu_param.channel_shared)})
        embed_blobs(node, [("weights", layer_blobs(node, expected=1)[0].ravel())])
        return True


class ELUExtractor(FrontExtractorOp):
    op = "ELU"

    @staticmethod
    def extract(node):
        Activation.update_node_stat(node, {"activation": "elu", "alpha": float(node.pb.elu_param.alpha)})
        return True


class SigmoidExtractor(FrontExtractorOp):
    op = "Sigmoid"

    @staticmethod
    def extract(node):
        Activation.update_node_stat(node, {"activation": "sigmoid"})
        return True


class TanHExtractor(FrontExtractorOp):
    op = "TanH"

    @staticmethod
    def extract(node):
        Activation.update_node_stat(node, {"activation": "tanh"})
        return True


class AbsValExtractor(FrontExtractorOp):
    op = "AbsVal"

    @staticmethod
    def extract(node):
        Activation.update_node_stat(node, {"activation": "abs"})
        return True


class PowerExtractor(FrontExtractorOp):
    op = "Power"

    @staticmethod
    def extract(node):
        p = node.pb.power_param
        Power.update_node_stat(node, {"power": float(p.power), "scale": float(p.scale), "shift": float(p.shift)})
        return True
