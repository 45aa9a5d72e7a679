"""Detection heads: PriorBox, PriorBoxClustered, DetectionOutput, Proposal, SimplerNMS."""
from .attribute import Bool, Enum, Float, Floats, Int
from .layer import LayerSchema

_PRIOR_COMMON = [
    Bool("clip", False),
    Bool("flip", False),
    Float("step", 0.0), Float("step_h", 0.0), Float("step_w", 0.0),
    Float("offset", 0.5),
    Floats("variance", None, doc="1 or 4 values; none means 0.1"),
    Int("img_h", 0), Int("img_w", 0),
]


def _prior_attr(name):
    return next(a for a in _PRIOR_COMMON if a.name == name)


SCHEMAS = [
    LayerSchema("PriorBox", [
        _prior_attr("step"), _prior_attr("step_h"), _prior_attr("step_w"),
        Floats("min_size"),
        Floats("max_size", None),
        _prior_attr("offset"), _prior_attr("flip"), _prior_attr("clip"),
        Floats("aspect_ratio", None),
        _prior_attr("variance"),
        Int("img_size", 0), _prior_attr("img_h"), _prior_attr("img_w"),
        Bool("scale_all_sizes", True),
    ]),
    LayerSchema("PriorBoxClustered", [
        Floats("width"), Floats("height"),
        _prior_attr("clip"), _prior_attr("flip"),
        _prior_attr("step"), _prior_attr("step_w"), _prior_attr("step_h"),
        _prior_attr("offset"), _prior_attr("variance"),
        _prior_attr("img_h"), _prior_attr("img_w"),
    ]),
    LayerSchema("DetectionOutput", [
        Int("num_classes", min=1),
        Bool("share_location", True),
        Int("background_label_id", 0),
        Float("nms_threshold", 0.3),
        Int("top_k", -1),
        Float("eta", 1.0),
        Enum("code_type", ("caffe.PriorBoxParameter.CORNER", "caffe.PriorBoxParameter.CENTER_SIZE",
                           "caffe.PriorBoxParameter.CORNER_SIZE"), "caffe.PriorBoxParameter.CORNER",
             spellings={s: "caffe.PriorBoxParameter." + s.upper() for s in
                        ("CORNER", "CENTER_SIZE", "CORNER_SIZE", "corner", "center_size", "corner_size")}),
        Bool("variance_encoded_in_target", False),
        Int("keep_top_k", -1),
        Float("confidence_threshold", float("-inf")),
        Bool("normalized", True, doc="false: boxes and priors in pixels of input_width x input_height"),
        Int("input_height", 1, min=1),
        Int("input_width", 1, min=1),
        # the TF Object Detection API's clipping to the image (OpenVINO's DetectionOutput attributes)
        Bool("clip_before_nms", False, doc="decoded boxes clipped to [0, 1] before NMS"),
        Bool("clip_after_nms", False, doc="detected boxes clipped to [0, 1]"),
        Bool("drop_empty_boxes", False, doc="a detection whose box (as written) has no area is dropped before the "
             "keep_top_k cut: the TF Object Detection API's clip_to_window(filter_nonoverlapping)"),
    ]),
    LayerSchema("Proposal", [
        Int("base_size", min=1), Int("feat_stride", min=1), Int("min_size", min=0),
        Float("nms_thresh"), Int("post_nms_topn", min=1), Int("pre_nms_topn", min=1),
        Floats("ratio"), Floats("scale"),
    ]),
    LayerSchema("SimplerNMS", [
        Int("min_bbox_size", min=0), Int("feat_stride", min=1),
        Int("pre_nms_topn", min=1), Int("post_nms_topn", min=1),
        Float("iou_threshold"), Floats("scale"),
    ]),
]
