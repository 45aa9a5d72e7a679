"""Attribute extraction: every Caffe layer node becomes a typed op.

Priority, as the reference guide says: a layer registered in
CustomLayersMapping.xml, then a user extension, then the standard extractors
(user extensions loaded later replace standard ones of the same name in the
same registry; the mapping file is consulted first by `extract_all`).
"""
from __future__ import annotations

from core.errors import Error
from core.front.extractor import FrontExtractorOp


def _python_layer_key(node) -> str | None:
    """Caffe `Python` layers dispatch on `module.layer` (reference guide)."""
    pb = node.soft_get("pb")
    if pb is None or not pb.HasField("python_param"):
        return None
    return "{}.{}".format(pb.python_param.module, pb.python_param.layer)


def find_extractor(node, extractors: dict):
    if node.caffe_type == "Python":
        key = _python_layer_key(node)
        if key in extractors:
            return extractors[key]
    return extractors.get(node.caffe_type)


def custom_layer_error(node) -> Error:
    return Error(
        "Found custom layer \"{}\" of type \"{}\". Model Optimizer does not support this layer. Please, register "
        "it in CustomLayersMapping.xml (-k, with --use-caffe-fallback to let Caffe infer its shape) or implement "
        "an extension for it (--extensions DIR with ops/ and front/caffe/ modules).",
        node.name, _python_layer_key(node) or node.caffe_type, faq=45)


def extract_all(graph, custom_mapping=None):
    extractors = FrontExtractorOp.extractors_for("caffe")
    for node in graph.op_nodes():
        if node.has("op"):  # net-level inputs are created typed
            continue
        if custom_mapping is not None and custom_mapping.handles(node):
            custom_mapping.extract(node)
            continue
        extractor = find_extractor(node, extractors)
        if extractor is None:
            raise custom_layer_error(node)
        try:
            ok = extractor.extract(node)
        except Error:
            raise
        except Exception as exc:  # an extractor bug must still name the layer
            raise Error("Cannot extract the attributes of layer '{}' ({}): {}: {}", node.name, node.caffe_type,
                        type(exc).__name__, exc) from exc
        if ok is False or not node.has("op"):
            raise custom_layer_error(node)
