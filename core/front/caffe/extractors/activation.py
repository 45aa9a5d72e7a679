"""ReLU, ReLU6, PReLU, ELU, Sigmoid, TanH, AbsVal, Power."""
from core.errors import FrameworkError
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
        # brocolli-caffe: min(max(x, 0) + negative_slope * min(x, 0), threshold); OpenVINO mo's schema calls
        # the cap n. A fork's schema (--caffe_proto) may have neither.
        pb = node.pb
        param = pb.relu6_param if "relu6_param" in pb.DESCRIPTOR.fields_by_name else None
        fields = param.DESCRIPTOR.fields_by_name if param is not None else {}
        cap = 6.0
        if "n" in fields and param.HasField("n"):
            cap = float(param.n)
        elif "threshold" in fields:
            cap = float(param.threshold)
        slope = float(param.negative_slope) if "negative_slope" in fields else 0.0
        if slope:
            raise FrameworkError("ReLU6 '{}' has negative_slope {}: a leaky ReLU capped at {} is not an IR layer. "
                                 "Write an extension for it (--extensions).", node.name, slope, cap)
        Clamp.update_node_stat(node, {"min": 0.0, "max": cap})
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
