"""Which support JSON fits an OD API export, and the checks before the replacers run.

The reference shipped one JSON per OD API version range because the exports' node
names changed (Postprocessor/ToFloat, then Cast, then Cast_1; the Faster R-CNN
proposal and second-stage names); users picked the wrong one often. Here a JSON
fits a graph when every node its descriptions name exists: the points' start and
end nodes, and a node in each scope instance. With only a pipeline config, the
first JSON of the meta-architecture that fits is used (the log says which); a
given JSON that does not fit is an [ ERROR ] naming the nodes it expected and the
JSON that fits.
"""
from __future__ import annotations

import logging
import os
import re

from core.errors import Error
from core.front.custom_config import load_custom_replacement_configs
from core.front.tf.object_detection.common import OPTION, PIPELINE_CONFIG_KEY
from core.front.tf.object_detection.pipeline_config import read_pipeline_config

log = logging.getLogger("mo_core")
SUPPORT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support")
# newest first: the first that fits is chosen
CANDIDATES = {
    "ssd": ("ssd_support_api_v1.15.json", "ssd_support_api_v1.14.json", "ssd_v2_support.json"),
    "faster_rcnn": ("faster_rcnn_support_api_v1.15.json", "faster_rcnn_support_api_v1.14.json",
                    "faster_rcnn_support_api_v1.13.json", "faster_rcnn_support_api_v1.10.json",
                    "faster_rcnn_support_api_v1.7.json", "faster_rcnn_support.json"),
}
ARCHITECTURE_OF = {"ObjectDetectionAPISSDPostprocessorReplacement": "ssd",
                   "ObjectDetectionAPIProposalReplacement": "faster_rcnn"}
ODAPI_IDS = {"ObjectDetectionAPIPreprocessorReplacement", "ObjectDetectionAPIPreprocessor2Replacement",
             "ObjectDetectionAPISSDPostprocessorReplacement", "ObjectDetectionAPIProposalReplacement",
             "ObjectDetectionAPIDetectionOutputReplacement", "ObjectDetectionAPIOutputReplacement",
             "ObjectDetectionAPIConstValueOverride"}


def missing_nodes(graph, path: str) -> list[str]:
    """The node names (or scope regexes) `path`'s descriptions need that the graph lacks."""
    names = {str(a.get("name")) for _, a in graph.nodes(data=True) if a.get("kind") == "op"}
    missing = []
    for desc in load_custom_replacement_configs([path]):
        if desc.match_kind == "points":
            for key in ("start_points", "end_points"):
                missing += [n for n in desc.instances.get(key, []) if n not in names]
        elif desc.match_kind == "scope":
            for instance in desc.instances:
                regex = re.compile(instance)
                if not any(regex.match(n) for n in names):
                    missing.append(instance)
    return missing


def support_json(name: str) -> str:
    return os.path.join(SUPPORT_DIR, name)


def prepare(graph, options, configs: list[str]) -> tuple[list[str], str | None]:
    """Reads the pipeline config into the graph; returns the JSON files to run and the
    name of the support JSON chosen (when none was given)."""
    path = getattr(options, "tensorflow_object_detection_api_pipeline_config", None)
    odapi_given = [c for c in configs if _odapi_ids(c)]
    if path is None:
        if odapi_given:
            raise Error("The support JSON '{}' converts a TensorFlow Object Detection API export, which needs its "
                        "pipeline.config: add {} PATH/pipeline.config.", odapi_given[0], OPTION)
        return configs, None
    config = read_pipeline_config(path)
    graph.graph[PIPELINE_CONFIG_KEY] = config
    candidates = CANDIDATES.get(config.meta_architecture)
    if candidates is None:
        raise Error("The pipeline config '{}' describes a '{}' model; mo-core converts OD API 'ssd' and "
                    "'faster_rcnn' models.", path, config.meta_architecture)
    fitting = next((c for c in candidates if not missing_nodes(graph, support_json(c))), None)
    for given in odapi_given:
        ids = {d.id for d in load_custom_replacement_configs([given])}
        for rid, architecture in ARCHITECTURE_OF.items():
            if rid in ids and config.meta_architecture != architecture:
                raise Error("The pipeline config '{}' describes a '{}' model, but the support JSON '{}' converts '{}' "
                            "models ({}): give the export's own pipeline.config, or the JSON of its "
                            "meta-architecture.", path, config.meta_architecture, given, architecture, rid)
        missing = missing_nodes(graph, given)
        if missing:
            raise Error("The support JSON '{}' does not fit this export: it expects node(s) {} that the graph does not "
                        "have. {}", given, ", ".join("'{}'".format(m) for m in missing[:6]),
                        "This export fits {} (mo-core chooses it when only {} is given).".format(
                            fitting, OPTION) if fitting else _expected(graph, config.meta_architecture))
    if odapi_given:
        return configs, None
    if fitting is None:
        raise Error("No support JSON of mo-core fits this '{}' export: {}", config.meta_architecture,
                    _expected(graph, config.meta_architecture))
    log.info("The OD API export fits %s: converting with it.", support_json(fitting))
    return [support_json(fitting)] + configs, fitting


def _expected(graph, architecture: str) -> str:
    parts = ["{} expects {}".format(c, ", ".join("'{}'".format(m) for m in missing_nodes(graph, support_json(c))[:4]))
             for c in CANDIDATES[architecture]]
    return "; ".join(parts) + ". Is the model an export of the OD API's exporter (frozen_inference_graph.pb) with " \
                              "its own pipeline.config?"


def _odapi_ids(path: str) -> bool:
    return any(d.id in ODAPI_IDS for d in load_custom_replacement_configs([path]))
