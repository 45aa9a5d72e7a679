"""ObjectDetectionAPISSDPostprocessorReplacement: the SSD export's Postprocessor
(box decoding, score conversion, BatchMultiClassNonMaxSuppression's while loop)
becomes one DetectionOutput, as the reference converted it:

- locations: the box predictor's encodings [1, A, 4] in the OD API's (ty, tx, th,
  tw) order, swapped to DetectionOutput's (tx, ty, tw, th) by a Split + Concat
  (which core/middle/shuffle_fold.py later folds into the predictors' weights, as
  the reference swapped them);
- confidences: the class logits [1, A, C + 1] divided by logit_scale, through the
  score converter (SIGMOID, SOFTMAX or IDENTITY);
- priors: the anchors the export computes from constants ([1, A, 4], ymin xmin
  ymax xmax), folded at conversion into [1, 2, A * 4] x-first with the box
  coder's variances (1 / its scales);
- DetectionOutput: CENTER_SIZE, class 0 the background, the NMS thresholds and
  max_total_detections of the pipeline config; top_k -1, since the OD API runs
  NMS over every box above the score threshold (max_detections_per_class caps
  each class after NMS, which the global cut of keep_top_k makes the same);
  boxes clipped to the image as the JSON's clip_before_nms/clip_after_nms say.

The IR's one output is the DetectionOutput [1, 1, N, 7]: image id, label (the
OD API's class id, 1-based), score, xmin, ymin, xmax, ymax (normalized).
"""
from __future__ import annotations

import numpy as np

from core.errors import Error
from core.front.replacement import FrontReplacementFromConfigFileSubGraph
from core.front.tf.object_detection.common import (
    add_output, drop_export_outputs, pipeline_config, producer,
)
from core.graph.graph import Node, create_edge
from core.ops.activation import Activation, Power
from core.ops.detection import DetectionOutput
from core.ops.normalization import SoftMax
from core.ops.shape_ops import Concat, Reshape, Split

OUTPUT_NAME = "DetectionOutput"


def matched(graph, match, suffix: str, replacement_id: str) -> Node:
    found = [n for n in match.matched_nodes_names() if str(graph.nodes[n].get("name", "")).endswith(suffix)]
    if len(found) != 1:
        raise Error("The replacement '{}' expects one node named '...{}' in its sub-graph, found {}: the support JSON "
                    "does not fit this export (use the JSON of the OD API version that made it).", replacement_id,
                    suffix, len(found))
    return Node(graph, found[0])


def data_input(node: Node) -> tuple[Node, int]:
    """The input of a binary op that is not a constant."""
    for port in (0, 1):
        src, out = producer(node, port)
        if src.soft_get("op") != "Const":
            return src, out
    raise Error("Node '{}' reads only constants.", node.soft_get("name"))


def swap_yx(graph, tensor: tuple[Node, int], name: str, axis: int = 2) -> tuple[Node, int]:
    """(y, x, h, w) <-> (x, y, w, h) on the last axis (`axis`) of a 3-D (2-D) tensor."""
    split = Split(graph, {"axis": axis, "nchw_layout": True}).add_node({"name": name + "/split"})
    create_edge(tensor[0], split, tensor[1], 0)
    concat = Concat(graph, {"axis": axis, "nchw_layout": True}).add_node({"name": name + "/swap"})
    for in_port, part in enumerate((1, 0, 3, 2)):
        create_edge(split, concat, part, in_port)
    return concat, 0


def flatten(graph, tensor: tuple[Node, int], name: str, dim=(0, -1)) -> Node:
    node = Reshape(graph, {"dim": np.array(dim), "nchw_layout": True}).add_node({"name": name})
    create_edge(tensor[0], node, tensor[1], 0)
    return node


def score_converter(graph, tensor, converter: str, logit_scale: float, axis: int, name: str) -> tuple[Node, int]:
    if logit_scale != 1.0:
        scale = Power(graph, {"scale": 1.0 / logit_scale, "nchw_layout": True}).add_node({"name": name + "/scale"})
        create_edge(tensor[0], scale, tensor[1], 0)
        tensor = (scale, 0)
    if converter == "SIGMOID":
        node = Activation(graph, {"activation": "sigmoid", "nchw_layout": True}).add_node({"name": name})
    elif converter == "SOFTMAX":
        node = SoftMax(graph, {"axis": axis, "nchw_layout": True}).add_node({"name": name})
    elif converter == "IDENTITY":
        return tensor
    else:
        raise Error("The pipeline config's score_converter '{}' is not one of SIGMOID, SOFTMAX, IDENTITY.", converter)
    create_edge(tensor[0], node, tensor[1], 0)
    return node, 0


def priors_with_variances(anchors_yx: np.ndarray, variances) -> np.ndarray:
    """[.., A, 4] anchors (ymin, xmin, ymax, xmax) -> DetectionOutput's priors [1, 2, A * 4]."""
    boxes = np.asarray(anchors_yx, np.float32).reshape(-1, 4)[:, [1, 0, 3, 2]]
    var = np.tile(np.asarray(variances, np.float32), (len(boxes), 1))
    return np.stack([boxes.reshape(-1), var.reshape(-1)])[None].astype(np.float32)


def detection_attrs(classes: int, iou: float, score: float, keep: int, custom: dict, share_location=True) -> dict:
    """DetectionOutput's attributes for the OD API's NMS: centre-size boxes, class 0 the background,
    top_k -1 (NMS over every box above the score threshold), clipping as the JSON says."""
    return {"num_classes": classes, "share_location": share_location, "background_label_id": 0,
            "code_type": "caffe.PriorBoxParameter.CENTER_SIZE", "variance_encoded_in_target": False,
            "nms_threshold": iou, "confidence_threshold": score, "top_k": -1, "keep_top_k": keep,
            "clip_before_nms": bool(custom.get("clip_before_nms", False)),
            "clip_after_nms": bool(custom.get("clip_after_nms", True)),
            # the OD API's NMS drops a box left with no area by its clip to the image (OpenVINO's keeps it)
            "drop_empty_boxes": True}


def detection_output(graph, attrs: dict, loc, conf, priors: tuple[Node, int], variances, name=OUTPUT_NAME) -> Node:
    """DetectionOutput over (flattened loc, flattened conf, constant anchors): the anchors
    get their DetectionOutput form once shape inference has computed their value."""
    node = DetectionOutput(graph, dict(attrs, nchw_layout=True, odapi_variances=list(variances))).add_node(
        {"name": name})
    node["old_infer"] = node["infer"]
    node["infer"] = _infer_with_anchors
    create_edge(loc, node, 0, 0)
    create_edge(conf, node, 0, 1)
    create_edge(priors[0], node, priors[1], 2)
    return node


def _infer_with_anchors(node):
    """The first shape inference (TensorFlow's layout) computes the anchors from the export's
    constants; they become a constant input of their own, and what computed them goes."""
    prior = node.in_node(2)
    if prior.soft_get("odapi_priors"):  # done (after lowering, a Const layer holds them)
        node.old_infer(node)
        return
    if prior.value is None:
        raise Error("The anchors of '{}' are not constant: the OD API export must have a fixed input size (the "
                    "pipeline config's resizer, or --input_shape).", node.name)
    replace_input_by_constant(node, 2, priors_with_variances(prior.value, node.odapi_variances))
    node.old_infer(node)


def replace_input_by_constant(node, port: int, value: np.ndarray):
    """Input `port` of `node` (data-node graph) reads a new constant; the nodes that only
    computed the old input are removed."""
    graph = node.graph
    old = node.in_node(port)
    const = graph.add_data(node.name + "/priors", value=value.astype(np.float32), odapi_priors=True)
    for src, dst, key, attrs in list(graph.in_edges(node.id, keys=True, data=True)):
        if src == old.id and attrs.get("in") == port:
            graph.remove_edge(src, dst, key)
    graph.add_edge(const.id, node.id, **{"in": port})
    dead = [old.id] if not graph.out_degree(old.id) and not old.soft_get("is_output") else []
    while dead:
        data_id = dead.pop()
        producers = list(graph.predecessors(data_id))
        graph.remove_node(data_id)
        for op_id in producers:
            if any(graph.out_degree(d) or graph.nodes[d].get("is_output") for d in graph.successors(op_id)):
                continue
            inputs = list(graph.predecessors(op_id))
            graph.remove_nodes_from([op_id] + list(graph.successors(op_id)))
            dead += [d for d in inputs if d in graph and not graph.out_degree(d) and
                     not graph.nodes[d].get("is_output")]


class ObjectDetectionAPISSDPostprocessorReplacement(FrontReplacementFromConfigFileSubGraph):
    replacement_id = "ObjectDetectionAPISSDPostprocessorReplacement"

    def replace_sub_graph(self, graph, match):
        rid = self.replacement_id
        config = pipeline_config(graph, rid, ("ssd",))
        custom = match.custom_replacement_desc.custom_attributes
        logits = data_input(matched(graph, match, "Postprocessor/scale_logits", rid))
        encodings = producer(matched(graph, match, "Postprocessor/Reshape_1", rid), 0)
        anchors = producer(matched(graph, match, "Postprocessor/Tile", rid), 0)
        nms = config.nms()
        variances = config.box_coder_variances()
        classes = config.num_classes() + 1
        loc = flatten(graph, swap_yx(graph, encodings, "DetectionOutput/loc"), "DetectionOutput/loc/flatten")
        scores = score_converter(graph, logits, nms["score_converter"], nms["logit_scale"], 2,
                                 "DetectionOutput/scores")
        conf = flatten(graph, scores, "DetectionOutput/conf/flatten")
        attrs = detection_attrs(classes, nms["iou_threshold"], nms["score_threshold"], nms["max_total_detections"],
                                custom)
        output = detection_output(graph, attrs, loc, conf, anchors, variances)
        graph.remove_nodes_from([n for n in match.matched_nodes_names() if n in graph])
        drop_export_outputs(graph, output)
        add_output(output, OUTPUT_NAME)
