"""ROIPooling and PSROIPooling."""
from core.front.extractor import FrontExtractorOp
from core.ops.roi_pooling import PSROIPooling, ROIPooling


class ROIPoolingExtractor(FrontExtractorOp):
    op = "ROIPooling"

    @staticmethod
    def extract(node):
        p = node.pb.roi_pooling_param
        ROIPooling.update_node_stat(node, {"pooled_h": int(p.pooled_h), "pooled_w": int(p.pooled_w),
                                           "spatial_scale": float(p.spatial_scale)})
        return True


class PSROIPoolingExtractor(FrontExtractorOp):
    op = "PSROIPooling"

    @staticmethod
    def extract(node):
        p = node.pb.psroi_pooling_param
        PSROIPooling.update_node_stat(node, {"output_dim": int(p.output_dim), "group_size": int(p.group_size),
                                             "spatial_scale": float(p.spatial_scale)})
        return True
