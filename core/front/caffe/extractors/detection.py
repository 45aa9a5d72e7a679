"""PriorBox, PriorBoxClustered, DetectionOutput, Proposal."""
from core.errors import FrameworkError
from core.front.extractor import FrontExtractorOp
from core.ops.detection import DetectionOutput, PriorBox, PriorBoxClustered, Proposal


def _floats(values):
    return [float(v) for v in values]


def _variance(values):
    # Caffe: no variance -> 0.1 for all four; one value -> used for all four
    v = _floats(values)
    return v if v else [0.1]


class PriorBoxExtractor(FrontExtractorOp):
    """Also PriorBoxClustered-style nets that give width/height lists to PriorBox."""
    op = "PriorBox"

    @staticmethod
    def extract(node):
        p = node.pb.prior_box_param
        common = {"flip": bool(p.flip), "clip": bool(p.clip), "variance": _variance(p.variance),
                  "offset": float(p.offset), "step": float(p.step), "step_h": float(p.step_h),
                  "step_w": float(p.step_w), "img_h": int(p.img_h), "img_w": int(p.img_w)}
        if p.width or p.height:
            PriorBoxClustered.update_node_stat(node, dict(common, width=_floats(p.width), height=_floats(p.height)))
            return True
        if not p.min_size:
            raise FrameworkError("PriorBox '{}' has no min_size; SSD requires at least one.", node.name)
        PriorBox.update_node_stat(node, dict(common, min_size=_floats(p.min_size), max_size=_floats(p.max_size),
                                             aspect_ratio=_floats(p.aspect_ratio), img_size=int(p.img_size),
                                             scale_all_sizes=True))
        return True


class PriorBoxClusteredExtractor(FrontExtractorOp):
    op = "PriorBoxClustered"

    @staticmethod
    def extract(node):
        p = node.pb.prior_box_param
        PriorBoxClustered.update_node_stat(node, {
            "width": _floats(p.width), "height": _floats(p.height), "flip": bool(p.flip), "clip": bool(p.clip),
            "variance": _variance(p.variance), "offset": float(p.offset), "step": float(p.step),
            "step_h": float(p.step_h), "step_w": float(p.step_w), "img_h": int(p.img_h), "img_w": int(p.img_w)})
        return True


class DetectionOutputExtractor(FrontExtractorOp):
    op = "DetectionOutput"

    @staticmethod
    def extract(node):
        p = node.pb.detection_output_param
        code_types = {1: "caffe.PriorBoxParameter.CORNER", 2: "caffe.PriorBoxParameter.CENTER_SIZE",
                      3: "caffe.PriorBoxParameter.CORNER_SIZE"}
        DetectionOutput.update_node_stat(node, {
            "num_classes": int(p.num_classes), "share_location": bool(p.share_location),
            "background_label_id": int(p.background_label_id), "nms_threshold": float(p.nms_param.nms_threshold),
            "top_k": int(p.nms_param.top_k) if p.nms_param.HasField("top_k") else -1,
            "eta": float(p.nms_param.eta), "code_type": code_types[p.code_type],
            "variance_encoded_in_target": bool(p.variance_encoded_in_target), "keep_top_k": int(p.keep_top_k),
            # unset means "keep every score" in Caffe (-FLT_MAX), not 0
            "confidence_threshold": float(p.confidence_threshold) if p.HasField("confidence_threshold")
            else -3.4028234663852886e38,
            # R-FCN style: priors are ROIs in pixels [batch, x1, y1, x2, y2] of an input_width x input_height image
            "normalized": bool(p.normalized), "input_width": int(p.input_width), "input_height": int(p.input_height)})
        return True


class ProposalExtractor(FrontExtractorOp):
    op = "Proposal"

    @staticmethod
    def extract(node):
        p = node.pb.proposal_param
        Proposal.update_node_stat(node, {
            "feat_stride": int(p.feat_stride), "base_size": int(p.base_size), "min_size": int(p.min_size),
            "ratio": _floats(p.ratio) or [0.5, 1.0, 2.0], "scale": _floats(p.scale) or [8.0, 16.0, 32.0],
            "pre_nms_topn": int(p.pre_nms_topn), "post_nms_topn": int(p.post_nms_topn),
            "nms_thresh": float(p.nms_thresh)})
        return True
