"""Input and DummyData layers -> IR Input."""
import numpy as np

from core.errors import FrameworkError
from core.front.extractor import FrontExtractorOp
from core.ops.parameter import Parameter


class InputExtractor(FrontExtractorOp):
    op = "Input"

    @staticmethod
    def extract(node):
        shapes = list(node.pb.input_param.shape)
        if len(node.out_nodes()) > 1:
            raise FrameworkError("Input layer '{}' has {} tops; split it into one Input layer per top.",
                                 node.name, len(node.out_nodes()))
        shape = np.array(shapes[0].dim, dtype=np.int64) if shapes else None
        Parameter.update_node_stat(node, {"shape": shape})
        return True


class DummyDataExtractor(FrontExtractorOp):
    op = "DummyData"

    @staticmethod
    def extract(node):
        param = node.pb.dummy_data_param
        if param.shape:
            shape = np.array(param.shape[0].dim, dtype=np.int64)
        elif param.num:
            shape = np.array([param.num[0], param.channels[0], param.height[0], param.width[0]], dtype=np.int64)
        else:
            shape = None
        Parameter.update_node_stat(node, {"shape": shape})
        return True
