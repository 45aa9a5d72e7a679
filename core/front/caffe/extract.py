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


def layer_kind(node) -> str:
    """How the report names a layer's type: `Python` layers by module.layer."""
    key = _python_layer_key(node)
    return "Python ({})".format(key) if key else node.caffe_type


_NAMES_SHOWN = 8


def unsupported_layers_error(nodes) -> Error:
    """One error for every layer without an extractor: types with their counts and
    layer names, so a user sees all the work an unknown model needs at once."""
    by_kind: dict[str, list[str]] = {}
    for node in nodes:
        by_kind.setdefault(layer_kind(node), []).append(node.name)
    lines = []
    for kind, names in sorted(by_kind.items(), key=lambda item: (-len(item[1]), item[0])):
        shown = ", ".join('"{}"'.format(n) for n in names[:_NAMES_SHOWN])
        more = " and {} more".format(len(names) - _NAMES_SHOWN) if len(names) > _NAMES_SHOWN else ""
        lines.append("  {} ({} layer{}): {}{}".format(kind, len(names), "s" if len(names) > 1 else "", shown, more))
    return Error(
        "Model Optimizer does not support {} layer{} of {} type{} in this model (no extractor for them):\n{}\n"
        "Register these types in CustomLayersMapping.xml (-k, with --use-caffe-fallback to let Caffe infer their "
        "shapes) or implement extensions for them (--extensions DIR with ops/ and front/caffe/ modules).",
        len(nodes), "s" if len(nodes) > 1 else "", len(by_kind), "s" if len(by_kind) > 1 else "", "\n".join(lines),
        faq=44)


def extract_all(graph, custom_mapping=None, report_unsupported: bool = True):
    """Extracts every layer. Layers no extractor knows stay without `op`; with
    report_unsupported they are one error (the pipeline reports them after the front
    replacements, which may replace them)."""
    extractors = FrontExtractorOp.extractors_for("caffe")
    unsupported = []
    for node in graph.op_nodes():
        if node.has("op"):  # net-level inputs are created typed
            continue
        if custom_mapping is not None and custom_mapping.handles(node):
            custom_mapping.extract(node)
            continue
        extractor = find_extractor(node, extractors)
        if extractor is None:
            unsupported.append(node)
            continue
        try:
            ok = extractor.extract(node)
        except Error:
            raise
        except Exception as exc:  # an extractor bug must still name the layer (and the extractor's code)
            from core.front.replacement.runner import code_location
            raise Error("Cannot extract the attributes of layer '{}' ({}): {}: {} ({})", node.name, node.caffe_type,
                        type(exc).__name__, exc, code_location(extractor, exc)) from exc
        if ok is False or not node.has("op"):
            node.attrs.pop("op", None)
            unsupported.append(node)
    if unsupported and report_unsupported:
        raise unsupported_layers_error(unsupported)
