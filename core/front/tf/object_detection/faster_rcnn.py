"""The Faster R-CNN replacers of the reference's faster_rcnn_support*.json:

- ObjectDetectionAPIProposalReplacement: the first stage's post-processing (anchor
  decoding, objectness softmax, BatchMultiClassNonMaxSuppression's while loop, the
  normalization of the proposals) and the CropAndResize of the proposals become:
  a DetectionOutput over two classes (background, object) with the grid anchors as
  priors, which is exactly the OD API's first stage (centre-size decoding with the
  box coder's 10, 10, 5, 5 scales, NMS without the +1 pixel of Caffe's Proposal,
  the first_stage_max_proposals best, clipped to the image); its rows become ROIs
  [batch, x1, y1, x2, y2] and ROIPooling method=bilinear crops the feature map as
  crop_and_resize does. (The reference used a Proposal layer with OpenVINO's
  TensorFlow flavour; this project's Proposal is Caffe's - integer anchors, +1
  widths, min_size filtering - so the first stage is the layer that computes the
  OD API's proposals exactly.)
- ObjectDetectionAPIDetectionOutputReplacement: the SecondStagePostprocessor
  becomes one DetectionOutput: per-class box encodings (a zero background entry
  added), softmax scores, the proposals as priors with the box coder's variances.
- ObjectDetectionAPIOutputReplacement and ObjectDetectionAPIConstValueOverride:
  what the reference did in graph surgery here is done by the two replacers above
  (the model's one output is the DetectionOutput; the proposal count is the
  pipeline config's), so they check only that the Proposal replacement ran.

The grid anchors are computed from the pipeline config (GridAnchorGenerator:
scales x aspect ratios, base size, stride, offset) at the feature map size shape
inference finds, clipped to the image as the OD API does at inference.
"""
from __future__ import annotations

import numpy as np

from core.errors import Error
from core.front.replacement import (
    FrontReplacementFromConfigFileGeneral, FrontReplacementFromConfigFileSubGraph, FrontReplacementPattern,
)
from core.front.tf.object_detection.common import (
    PIPELINE_CONFIG_KEY, add_output, const, drop_export_outputs, pipeline_config, producer, rewire,
)
from core.front.tf.object_detection.ssd import (
    detection_attrs, detection_output, flatten, priors_with_variances, replace_input_by_constant, score_converter,
    swap_yx,
)
from core.graph.graph import Node, create_edge
from core.ops.detection import DetectionOutput
from core.ops.roi_pooling import ROIPooling
from core.ops.shape_ops import Concat, Reshape
from core.ops.slicing import CropRange

BOX_CODER_VARIANCES = [0.1, 0.1, 0.2, 0.2]   # the OD API's Faster R-CNN box coder: scales 10, 10, 5, 5
PROPOSALS_KEY = "odapi_proposals"           # graph.graph: (the proposal boxes tensor, their count)


def grid_anchors(config, height: int, width: int, image_h: int, image_w: int) -> np.ndarray:
    """GridAnchorGenerator's anchors for a feature map of height x width, clipped to the
    image and normalized: [H * W * A, 4] (ymin, xmin, ymax, xmax), anchor index (h * W + w) * A + a."""
    base = "first_stage_anchor_generator.grid_anchor_generator."
    scales = [float(s) for s in config.get_all(base + "scales")] or [0.5, 1.0, 2.0]
    ratios = [float(r) for r in config.get_all(base + "aspect_ratios")] or [0.5, 1.0, 2.0]
    size = (config.number(base + "height", 256), config.number(base + "width", 256))
    stride = (config.number(base + "height_stride", 16), config.number(base + "width_stride", 16))
    offset = (config.number(base + "height_offset", 0), config.number(base + "width_offset", 0))
    scale_grid, ratio_grid = np.meshgrid(np.float32(scales), np.float32(ratios))   # ratio-major, as tf.meshgrid
    scale_grid, ratio_grid = scale_grid.reshape(-1), ratio_grid.reshape(-1)
    root = np.sqrt(ratio_grid)
    heights = scale_grid / root * np.float32(size[0])
    widths = scale_grid * root * np.float32(size[1])
    ys = np.arange(height, dtype=np.float32) * np.float32(stride[0]) + np.float32(offset[0])
    xs = np.arange(width, dtype=np.float32) * np.float32(stride[1]) + np.float32(offset[1])
    cy = np.broadcast_to(ys[:, None, None], (height, width, len(heights)))
    cx = np.broadcast_to(xs[None, :, None], (height, width, len(heights)))
    h = np.broadcast_to(heights, cy.shape)
    w = np.broadcast_to(widths, cy.shape)
    boxes = np.stack([cy - 0.5 * h, cx - 0.5 * w, cy + 0.5 * h, cx + 0.5 * w], axis=-1).reshape(-1, 4)
    boxes = np.clip(boxes, 0, [image_h, image_w, image_h, image_w]).astype(np.float32)
    if np.any((boxes[:, 2] <= boxes[:, 0]) | (boxes[:, 3] <= boxes[:, 1])):
        raise Error("Some grid anchors of the first stage lie outside the {}x{} image: the OD API drops them, which "
                    "the IR cannot express. Check the anchor generator of the pipeline config.", image_h, image_w)
    return boxes / np.float32([image_h, image_w, image_h, image_w])


def _first_stage_priors(node):
    """Infer of the first-stage DetectionOutput: its priors input reads the RPN's box
    encodings map [1, H, W, A * 4] until shape inference gives H, W; then the grid anchors."""
    prior = node.in_node(2)
    if not prior.soft_get("odapi_priors"):
        shape = prior.shape
        config = node.graph.graph[PIPELINE_CONFIG_KEY]
        if "odapi_input_size" not in node.graph.graph:
            raise Error("The first stage of '{}' needs the image size that ObjectDetectionAPIPreprocessorReplacement "
                        "sets: use a support JSON that lists it.", node.name)
        image_h, image_w = node.graph.graph["odapi_input_size"]
        anchors = grid_anchors(config, int(shape[1]), int(shape[2]), image_h, image_w)
        replace_input_by_constant(node, 2, priors_with_variances(anchors, BOX_CODER_VARIANCES))
    node.old_infer(node)


class ObjectDetectionAPIProposalReplacement(FrontReplacementFromConfigFileSubGraph):
    replacement_id = "ObjectDetectionAPIProposalReplacement"

    def replace_sub_graph(self, graph, match):
        rid = self.replacement_id
        config = pipeline_config(graph, rid, ("faster_rcnn",))
        custom = match.custom_replacement_desc.custom_attributes
        members = set(match.matched_nodes_names())
        box_reshape = self._rpn_reshape(graph, members, "FirstStageBoxPredictor/Reshape")
        objectness_reshape = self._rpn_reshape(graph, members, "FirstStageBoxPredictor/Reshape_1")
        box_encodings, chain = self._squeezed(graph, box_reshape)
        max_proposals = config.number("first_stage_max_proposals", 300, int)
        attrs = detection_attrs(2, config.number("first_stage_nms_iou_threshold", 0.7),
                                config.number("first_stage_nms_score_threshold", 0.0), max_proposals, custom)
        loc = flatten(graph, swap_yx(graph, box_encodings, "FirstStageProposals/loc"), "FirstStageProposals/loc/flatten")
        conf = flatten(graph, score_converter(graph, (objectness_reshape, 0), "SOFTMAX", 1.0, 2,
                                              "FirstStageProposals/objectness"), "FirstStageProposals/conf/flatten")
        # the priors input reads the RPN's box encodings map until shape inference gives its size
        proposals = detection_output(graph, attrs, loc, conf, producer(box_reshape, 0), BOX_CODER_VARIANCES,
                                     name="FirstStageProposals")
        proposals["infer"] = _first_stage_priors
        # rows [image, label, score, x1, y1, x2, y2] -> the proposal boxes [K, 4] (normalized, x first)
        rows = Reshape(graph, {"dim": np.array([max_proposals, 7]), "nchw_layout": True}).add_node(
            {"name": "FirstStageProposals/rows"})
        create_edge(proposals, rows, 0, 0)
        boxes = CropRange(graph, {"axis": [1], "crop_begin": [3], "crop_end": [0], "nchw_layout": True}).add_node(
            {"name": "FirstStageProposals/boxes"})
        create_edge(rows, boxes, 0, 0)
        graph.graph[PROPOSALS_KEY] = ((boxes, 0), max_proposals)
        # a model output until the second stage reads them (dead code goes after each replacer)
        add_output(boxes, PROPOSALS_KEY)
        keep = {box_reshape.id, objectness_reshape.id} | {n.id for n in chain}
        keep |= {src for n in keep for src in graph.predecessors(n) if graph.nodes[src].get("op") == "Const"}
        graph.remove_nodes_from([n for n in members if n not in keep and n in graph])

    @staticmethod
    def _rpn_reshape(graph, members, name) -> Node:
        found = [n for n in members if str(graph.nodes[n].get("name", "")).endswith(name)]
        found = found or [n for n, a in graph.nodes(data=True) if str(a.get("name", "")).endswith(name)]
        if len(found) != 1:
            raise Error("The replacement 'ObjectDetectionAPIProposalReplacement' expects one node '{}' (the RPN's "
                        "predictions), found {}: the support JSON does not fit this export.", name, len(found))
        return Node(graph, found[0])

    @staticmethod
    def _squeezed(graph, reshape) -> tuple[tuple[Node, int], list[Node]]:
        """The RPN box encodings [1, A, 4]: the export's Squeeze of the [1, A, 1, 4] Reshape (through
        Identity nodes), kept so that its lowering keeps TensorFlow's element order; and the nodes kept."""
        node, chain = reshape, []
        while True:
            readers = [Node(graph, dst) for _, dst in graph.out_edges(node.id)]
            squeeze = [r for r in readers if r.soft_get("op") == "Squeeze"]
            if squeeze:
                return (squeeze[0], 0), chain + [squeeze[0]]
            ident = [r for r in readers if r.soft_get("op") == "Identity"]
            if not ident:
                raise Error("The replacement 'ObjectDetectionAPIProposalReplacement' expects a Squeeze of "
                            "'FirstStageBoxPredictor/Reshape' (the RPN's box encodings).")
            node = ident[0]
            chain.append(node)


class CropAndResizeReplacement(FrontReplacementPattern):
    """CropAndResize of the OD API's proposals -> ROIPooling method=bilinear (the
    reference's replacement): ROIs [0, x1, y1, x2, y2] from the proposal replacement's
    boxes; the Reshapes after the crop (to [1, K, h, w, C] and back) go with it. Only
    in a graph where ObjectDetectionAPIProposalReplacement ran."""
    framework = "tf"

    def run_after(self):
        return [ObjectDetectionAPIProposalReplacement]

    def run_before(self):
        return [ObjectDetectionAPIDetectionOutputReplacement]

    def find_and_replace_pattern(self, graph):
        if PROPOSALS_KEY not in graph.graph:
            return
        crops = [Node(graph, n) for n, a in graph.nodes(data=True) if a.get("op") == "CropAndResize"]
        if len(crops) != 1:
            raise Error("The OD API Faster R-CNN export has {} CropAndResize nodes; one is expected.", len(crops))
        crop = crops[0]
        config = graph.graph[PIPELINE_CONFIG_KEY]
        (boxes, max_proposals) = graph.graph[PROPOSALS_KEY]
        size = config.number("initial_crop_size", 14, int)
        batch = const(graph, "CropAndResize/batch_index", np.zeros((max_proposals, 1), np.float32))
        rois = Concat(graph, {"axis": 1, "nchw_layout": True}).add_node({"name": "CropAndResize/rois"})
        create_edge(batch, rois, 0, 0)
        create_edge(boxes[0], rois, boxes[1], 1)
        pooling = ROIPooling(graph, {"pooled_h": size, "pooled_w": size, "spatial_scale": 1.0,
                                     "method": "bilinear"}).add_node({"name": "CropAndResize"})
        image = producer(crop, 0)
        create_edge(image[0], pooling, image[1], 0)
        create_edge(rois, pooling, 0, 1)
        # the export reshapes the crops to [1, K, h, w, C] and back to [K, h, w, C]
        tensor = (crop, 0)
        while True:
            readers = [Node(graph, dst) for _, dst, a in graph.out_edges(tensor[0].id, data=True)
                       if a.get("out", 0) == tensor[1]]
            reshapes = [r for r in readers if r.soft_get("op") == "Reshape"]
            if len(reshapes) != 1:   # (the other readers are Shape ops for those reshapes)
                break
            tensor = (reshapes[0], 0)
        rewire(tensor, (pooling, 0))


class ObjectDetectionAPIDetectionOutputReplacement(FrontReplacementFromConfigFileSubGraph):
    replacement_id = "ObjectDetectionAPIDetectionOutputReplacement"

    def run_after(self):
        return [ObjectDetectionAPIProposalReplacement]

    def replace_sub_graph(self, graph, match):
        rid = self.replacement_id
        config = pipeline_config(graph, rid, ("faster_rcnn",))
        if PROPOSALS_KEY not in graph.graph:
            raise Error("The replacement '{}' needs ObjectDetectionAPIProposalReplacement to run first (the support "
                        "JSON lists both).", rid)
        custom = match.custom_replacement_desc.custom_attributes
        (boxes, max_proposals) = graph.graph[PROPOSALS_KEY]
        classes = config.num_classes()
        encodings = match.single_input_node(0)   # Reshape: [K, C, 4] (or [1, K, C, 4])
        logits = match.single_input_node(1)      # Reshape_1: [K, C + 1]
        enc_tensor = producer(*encodings)
        logit_tensor = producer(*logits)
        # per-class box encodings with a zero background entry: [1, K * (C + 1), 4], x first
        enc = Reshape(graph, {"dim": np.array([max_proposals, classes, 4]), "nchw_layout": True}).add_node(
            {"name": "SecondStage/loc/classes"})
        create_edge(enc_tensor[0], enc, enc_tensor[1], 0)
        zeros = const(graph, "SecondStage/loc/background", np.zeros((max_proposals, 1, 4), np.float32))
        with_bg = Concat(graph, {"axis": 1, "nchw_layout": True}).add_node({"name": "SecondStage/loc/with_background"})
        create_edge(zeros, with_bg, 0, 0)
        create_edge(enc, with_bg, 0, 1)
        rows = Reshape(graph, {"dim": np.array([1, max_proposals * (classes + 1), 4]), "nchw_layout": True}).add_node(
            {"name": "SecondStage/loc/rows"})
        create_edge(with_bg, rows, 0, 0)
        loc = flatten(graph, swap_yx(graph, (rows, 0), "SecondStage/loc"), "SecondStage/loc/flatten")
        nms = config.nms("second_stage_post_processing.")
        scores = score_converter(graph, logit_tensor, nms["score_converter"], nms["logit_scale"], 1,
                                 "SecondStage/scores")
        conf = flatten(graph, scores, "SecondStage/conf/flatten", dim=(1, -1))
        # priors: the proposals [K, 4] (normalized, x first) with the box coder's variances
        prior_boxes = Reshape(graph, {"dim": np.array([1, 1, max_proposals * 4]), "nchw_layout": True}).add_node(
            {"name": "SecondStage/priors/boxes"})
        create_edge(boxes[0], prior_boxes, boxes[1], 0)
        variances = const(graph, "SecondStage/priors/variances",
                          np.tile(np.float32(BOX_CODER_VARIANCES), max_proposals).reshape(1, 1, -1))
        priors = Concat(graph, {"axis": 1, "nchw_layout": True}).add_node({"name": "SecondStage/priors"})
        create_edge(prior_boxes, priors, 0, 0)
        create_edge(variances, priors, 0, 1)
        attrs = dict(detection_attrs(classes + 1, nms["iou_threshold"], nms["score_threshold"],
                                     nms["max_total_detections"], custom, share_location=False), nchw_layout=True)
        output = DetectionOutput(graph, attrs).add_node({"name": "DetectionOutput"})
        create_edge(loc, output, 0, 0)
        create_edge(conf, output, 0, 1)
        create_edge(priors, output, 0, 2)
        graph.remove_nodes_from([n for n in match.matched_nodes_names() if n in graph])
        graph.remove_nodes_from([n for n, a in graph.nodes(data=True)
                                 if str(a.get("name", "")).startswith(PROPOSALS_KEY + "/sink_port_")])
        drop_export_outputs(graph, output)
        add_output(output, "DetectionOutput")


class ObjectDetectionAPIOutputReplacement(FrontReplacementFromConfigFileGeneral):
    """The reference cut the model at the outputs its custom attribute names; here the
    DetectionOutput replacement made the DetectionOutput the one output, so this checks
    that none of those outputs is left unreplaced."""
    replacement_id = "ObjectDetectionAPIOutputReplacement"

    def run_after(self):
        return [ObjectDetectionAPIDetectionOutputReplacement]

    def transform_graph(self, graph, replacement_descriptions):
        from core.front.replacement.view import OUTPUT_OP
        names = [n for n in str(replacement_descriptions.get("outputs", "")).split(",") if n]
        left = [a.get("name") for _, a in graph.nodes(data=True)
                if a.get("op") == OUTPUT_OP and str(a.get("name", "")).rsplit("/sink_port_", 1)[0] in names]
        if left:
            raise Error("The outputs {} of the OD API export were not replaced by a DetectionOutput: the support JSON "
                        "does not fit this export.", ", ".join(sorted(left)))


class ObjectDetectionAPIConstValueOverride(FrontReplacementFromConfigFileGeneral):
    """Constants of the export set to pipeline config values ([node name, field] pairs),
    as the reference did (e.g. mul/y = first_stage_max_proposals); a node the other
    replacers removed needs nothing."""
    replacement_id = "ObjectDetectionAPIConstValueOverride"

    def transform_graph(self, graph, replacement_descriptions):
        from core.front.tf.object_detection.common import by_name
        config = graph.graph.get(PIPELINE_CONFIG_KEY)
        for pair in replacement_descriptions.get("replacements", []):
            if not (isinstance(pair, list) and len(pair) == 2):
                raise Error("ObjectDetectionAPIConstValueOverride: 'replacements' must hold [node name, pipeline "
                            "config field] pairs, got {!r}.", pair)
            node = by_name(graph, pair[0])
            if node is None or node.soft_get("op") != "Const" or config is None:
                continue
            if config.get(pair[1]) is None:
                continue
            value = config.number(pair[1], 0)
            if node.has_valid("tf"):   # a TensorFlow Const (core/front/tf/ops/identity.py)
                old = node.tf["value"]
                node.tf["value"] = np.full(old.shape, value, dtype=old.dtype)
            elif node.has_valid("value"):
                node["value"] = np.full(np.shape(node.value), value, dtype=np.asarray(node.value).dtype)
