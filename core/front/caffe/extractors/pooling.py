"""Pooling layer (MAX / AVE; STOCHASTIC has no inference meaning and is refused)."""
from core.errors import FrameworkError
from core.front.caffe.extractors.common import spatial
from core.front.extractor import FrontExtractorOp
from core.ops.pooling import Pooling


class PoolingExtractor(FrontExtractorOp):
    op = "Pooling"

    @staticmethod
    def extract(node):
        param = node.pb.pooling_param
        methods = {0: "max", 1: "avg"}
        if param.pool not in methods:
            raise FrameworkError("Pooling '{}' uses STOCHASTIC pooling, which has no IR equivalent; use MAX or "
                                 "AVE for inference.", node.name)
        # this Caffe's `ceil_mode` (bool) and newer BVLC's `round_mode` enum (CEIL=0, FLOOR=1)
        rounding = "ceil"
        if param.HasField("round_mode"):
            rounding = "floor" if param.round_mode == 1 else "ceil"
        elif param.HasField("ceil_mode") and not param.ceil_mode:
            rounding = "floor"
        Pooling.update_node_stat(node, {
            "kernel": spatial(param, "kernel_size", "kernel_h", "kernel_w", 0),
            "stride": spatial(param, "stride", "stride_h", "stride_w", 1),
            "pad": spatial(param, "pad", "pad_h", "pad_w", 0),
            "global_pool": bool(param.global_pooling),
            "pool-method": methods[param.pool],
            # Caffe's AVE divides by the window clipped to the padded image: padding counts
            "exclude-pad": "false",
            "rounding_type": rounding,
        })
        return True
