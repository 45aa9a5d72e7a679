"""Helpers shared by the OD API replacers: the pipeline config of the conversion,
edges of the front-form graph, and the model outputs the OD API exports add."""
from __future__ import annotations

import numpy as np

from core.errors import Error
from core.front.replacement.view import OUTPUT_OP
from core.graph.graph import Node, create_edge

PIPELINE_CONFIG_KEY = "odapi_pipeline_config"   # graph.graph: the parsed PipelineConfig
OPTION = "--tensorflow_object_detection_api_pipeline_config"
# what OD API exports name as outputs (frozen_inference_graph.pb); mo-core's IR has one DetectionOutput
EXPORT_OUTPUTS = ("detection_boxes", "detection_scores", "detection_classes", "num_detections",
                  "raw_detection_boxes", "raw_detection_scores", "detection_multiclass_scores",
                  "detection_anchor_indices", "detection_features", "detection_masks")


def pipeline_config(graph, replacement_id: str, expected: tuple[str, ...]):
    """The parsed pipeline config; an [ ERROR ] when none was given or it is for another meta-architecture."""
    config = graph.graph.get(PIPELINE_CONFIG_KEY)
    if config is None:
        raise Error("The replacement '{}' needs the model's pipeline.config: add {} pipeline.config (the file the OD "
                    "API exporter wrote next to frozen_inference_graph.pb).", replacement_id, OPTION)
    if config.meta_architecture not in expected:
        raise Error("The pipeline config '{}' describes a '{}' model, but the replacement '{}' is for {} models: give "
                    "this model's own pipeline.config, or the support JSON of its meta-architecture.", config.path,
                    config.meta_architecture, replacement_id, " or ".join("'{}'".format(e) for e in expected))
    return config


def consumers(node: Node, port: int = 0) -> list[tuple[Node, int]]:
    graph = node.graph
    return [(Node(graph, dst), attrs["in"]) for _, dst, attrs in graph.out_edges(node.id, data=True)
            if attrs.get("out", 0) == port]


def producer(node: Node, port: int = 0) -> tuple[Node, int]:
    graph = node.graph
    for src, _, attrs in graph.in_edges(node.id, data=True):
        if attrs.get("in") == port:
            return Node(graph, src), attrs.get("out", 0)
    raise Error("Node '{}' has no input {}: the graph is not an OD API export.", node.soft_get("name"), port)


def rewire(old: tuple[Node, int], new: tuple[Node, int]):
    """Every consumer of tensor `old` reads `new` instead."""
    graph = old[0].graph
    for _, dst, key, attrs in list(graph.out_edges(old[0].id, keys=True, data=True)):
        if attrs.get("out", 0) == old[1]:
            graph.remove_edge(old[0].id, dst, key)
            create_edge(new[0], Node(graph, dst), new[1], attrs["in"])


def by_name(graph, name: str) -> Node | None:
    for node_id, attrs in graph.nodes(data=True):
        if attrs.get("name") == name and attrs.get("op") != OUTPUT_OP:
            return Node(graph, node_id)
    return None


def drop_export_outputs(graph, keep: Node):
    """Removes the model outputs of the OD API export other than `keep`'s (their
    producers go with the dead-code elimination after the replacer)."""
    for node_id, attrs in list(graph.nodes(data=True)):
        if attrs.get("op") != OUTPUT_OP:
            continue
        name = str(attrs.get("name", "")).rsplit("/sink_port_", 1)[0]
        sources = [src for src, _ in graph.in_edges(node_id)]
        if name in EXPORT_OUTPUTS and keep.id not in sources:
            graph.remove_node(node_id)


def add_output(node: Node, name: str):
    graph = node.graph
    sink = graph.unique_id(name + "/sink_port_0")
    graph.add_node(sink, kind="op", op=OUTPUT_OP, type=OUTPUT_OP, name=sink)
    graph.add_edge(node.id, sink, out=0, **{"in": 0})


def const(graph, name: str, value) -> Node:
    value = np.asarray(value)
    node_id = graph.unique_id(name)
    graph.add_node(node_id, kind="op", op="Const", type="Const", name=node_id, value=value,
                   shape=np.array(value.shape, dtype=np.int64))
    return Node(graph, node_id)
