"""FrontExtractorOp: framework-specific attribute extractors (reference guide API).

A subclass names the framework layer type it handles (`op`) and implements
`extract(node)`, reading `node.pb` (the layer's parameters) and `node.caffe_blobs`
(the trained blobs of the same-named layer, if any), then calling
`Op.get_op_class_by_name(...).update_node_stat(node, attrs)`. Defining a subclass
registers it for the framework of its module (`core.front.caffe...`,
`front/caffe/` of an extension dir); a later one for the same `op` replaces it.
"""
from __future__ import annotations

from core.graph.blobs import add_blob


class FrontExtractorOp:
    registered: dict[str, dict[str, type["FrontExtractorOp"]]] = {}
    op: str | None = None
    enabled = True
    framework: str | None = None  # deduced from the module path when not given

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("op") is None or not cls.enabled:
            return
        framework = cls.framework or _framework_of(cls.__module__)
        FrontExtractorOp.registered.setdefault(framework, {})[cls.op] = cls

    @staticmethod
    def extract(node) -> bool:
        raise NotImplementedError

    @classmethod
    def extractors_for(cls, framework: str) -> dict[str, type["FrontExtractorOp"]]:
        return cls.registered.get(framework, {})


def _framework_of(module: str) -> str:
    parts = module.replace("\\", ".").split(".")
    for fw in ("caffe", "tf"):
        if fw in parts:
            return fw
    return "caffe"


def embed_blobs(node, blobs: list[tuple]):
    """Attaches (name, array or None) blobs to an op: they go to the .bin as <weights>, <biases>..."""
    for name, value in blobs:
        if value is not None:
            add_blob(node, name, value)
