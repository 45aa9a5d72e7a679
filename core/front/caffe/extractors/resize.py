"""Interp, Upsample (nearest, by an integer scale), Resample."""
from core.errors import FrameworkError
from core.front.extractor import FrontExtractorOp
from core.ops.resize import Interp, Resample


class InterpExtractor(FrontExtractorOp):
    op = "Interp"

    @staticmethod
    def extract(node):
        p = node.pb.interp_param
        Interp.update_node_stat(node, {"height": int(p.height), "width": int(p.width),
                                       "zoom_factor": int(p.zoom_factor), "shrink_factor": int(p.shrink_factor),
                                       "pad_beg": int(p.pad_beg), "pad_end": int(p.pad_end),
                                       # --interp_zoom_rule (load_model puts it on the graph)
                                       "zoom_rule": node.graph.graph.get("interp_zoom_rule", "multiply")})
        return True


class UpsampleExtractor(FrontExtractorOp):
    op = "Upsample"

    @staticmethod
    def extract(node):
        if len(node.pb.bottom) > 1:
            raise FrameworkError("Upsample '{}' takes pooling indices as a second input (SegNet max-unpooling), "
                                 "which IR v2 cannot express. Write an extension for it (--extensions) or map it "
                                 "in CustomLayersMapping.xml.", node.name, faq=44)
        p = node.pb.upsample_param
        scale = int(p.scale_h or p.scale)
        if p.scale_w and p.scale_w != scale:
            raise FrameworkError("Upsample '{}' has different scales for height and width ({} and {}); only one "
                                 "factor maps to an IR Resample.", node.name, scale, p.scale_w)
        Resample.update_node_stat(node, {"factor": float(scale), "resample_type": "caffe.ResampleParameter.NEAREST",
                                         "antialias": False})
        return True


class ResampleExtractor(FrontExtractorOp):
    op = "Resample"

    @staticmethod
    def extract(node):
        p = node.pb.resample_param
        names = {1: "NEAREST", 2: "LINEAR", 3: "CUBIC", 4: "AREA"}
        attrs = {"factor": float(p.factor), "antialias": bool(p.antialias),
                 "resample_type": "caffe.ResampleParameter." + names[p.type]}
        if p.height and p.width:
            attrs.update(height=int(p.height), width=int(p.width))
        Resample.update_node_stat(node, attrs)
        return True
