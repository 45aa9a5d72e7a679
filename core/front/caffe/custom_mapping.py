"""CustomLayersMapping.xml (-k): Caffe layers converted as they are (legacy mode).

    <CustomLayersMapping>
        <CustomLayer NativeType="Proposal" hasParam="true" protoParamName="proposal_param"/>
        <CustomLayer NativeType="CustomLayer" hasParam="false"/>
    </CustomLayersMapping>

As the reference does, the <CustomLayer> children are read whatever the root element
is called (its own shipped example's root is <CustomKernelsMapping>); any other
child element is skipped with a warning.

A mapped layer keeps its Caffe type in the IR and carries all of its parameters
(hasParam="true") or none. Its shape comes, in the reference guide's priority
order, from Caffe (--use-caffe-fallback), else from an op registered for the type
(an extension, else a standard op), else the conversion fails saying so.
"""
from __future__ import annotations

import os

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from core.errors import Error
from core.front.caffe.collect_attributes import collect_attributes, rename_reserved
from core.front.caffe.extractors.common import layer_blobs
from core.front.extractor import embed_blobs
from core.ops.op import Op

DEFAULT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "CustomLayersMapping.xml")
MAX_BYTES = 4 << 20


class CustomLayersMapping:
    def __init__(self, entries: dict, path: str, disable_omitting_optional=False,
                 enable_flattening_nested_params=False, fallback=None):
        self.entries = entries          # NativeType -> (has_param, proto_param_name or None)
        self.path = path
        self.disable_omitting_optional = disable_omitting_optional
        self.enable_flattening_nested_params = enable_flattening_nested_params
        self.fallback = fallback        # core.front.caffe.fallback.CaffeFallback or None

    @classmethod
    def load(cls, path: str | None, explicit: bool, warnings: list | None = None,
             **kwargs) -> "CustomLayersMapping | None":
        """Reads the file; the default path may be absent, an explicit -k may not.
        Skipped elements are reported in `warnings`."""
        path = path or DEFAULT_PATH
        if not os.path.isfile(path):
            if explicit:
                raise Error("The custom layers mapping file '{}' (-k) does not exist. Start from "
                            "core/front/caffe/CustomLayersMapping.xml.example.", path)
            return None
        if os.path.getsize(path) > MAX_BYTES:
            raise Error("The custom layers mapping file '{}' is larger than {} bytes.", path, MAX_BYTES)
        try:
            root = ElementTree.parse(path).getroot()
        except DefusedXmlException as exc:
            raise Error("The custom layers mapping file '{}' uses forbidden XML features ({}).", path, exc) from None
        except ElementTree.ParseError as exc:
            raise Error("The custom layers mapping file '{}' is not valid XML: {}.", path, exc) from None
        entries = {}
        for i, element in enumerate(root, start=1):
            where = "{} entry {} (<{}>)".format(path, i, element.tag)
            if element.tag != "CustomLayer":
                if warnings is not None:
                    warnings.append("Unexpected element in {}: only <CustomLayer .../> entries are read; it is "
                                    "skipped.".format(where))
                continue
            native = (element.get("NativeType") or "").strip()
            has_param = (element.get("hasParam") or "").strip().lower()
            param_name = (element.get("protoParamName") or "").strip() or None
            if not native:
                raise Error("{} has no NativeType (the layer's type in the prototxt).", where)
            if has_param not in ("true", "false"):
                raise Error("{} ({}): hasParam must be \"true\" or \"false\", got \"{}\".", where, native,
                            element.get("hasParam"))
            if has_param == "true" and not param_name:
                raise Error("{} ({}): hasParam=\"true\" needs protoParamName, the name of the layer's parameter "
                            "message field in caffe.proto (e.g. proposal_param).", where, native)
            if native in entries:
                raise Error("{}: layer type {} is mapped twice.", where, native)
            entries[native] = (has_param == "true", param_name)
        return cls(entries, path, **kwargs)

    def handles(self, node) -> bool:
        return node.soft_get("caffe_type") in self.entries

    def extract(self, node):
        native = node.caffe_type
        has_param, param_name = self.entries[native]
        attrs = {}
        if has_param:
            layer = node.pb
            if param_name not in layer.DESCRIPTOR.fields_by_name:
                raise Error("CustomLayersMapping.xml maps {} with protoParamName=\"{}\", but caffe.proto has no such "
                            "field in LayerParameter (layer '{}'). Check the name or add the field to "
                            "core/front/caffe/proto/mo_caffe.proto.", native, param_name, node.name, faq=1)
            attrs = rename_reserved(collect_attributes(
                getattr(layer, param_name), self.disable_omitting_optional, self.enable_flattening_nested_params),
                param_name)
        node["op"] = native
        node["type"] = native
        node["custom_attrs"] = attrs
        node["backend_attrs"] = [(k, (lambda key: lambda n: n.custom_attrs[key])(k)) for k in attrs]
        node["infer"] = self._infer_for(node)
        blobs = layer_blobs(node)
        names = ["weights", "biases"] + ["custom_{}".format(i) for i in range(2, len(blobs))]
        embed_blobs(node, [(n, b.ravel()) for n, b in zip(names, blobs)])

    def _infer_for(self, node):
        if self.fallback is not None and self.fallback.enabled:
            return self.fallback.infer
        op_class = Op.registered_ops.get(node.caffe_type)
        if op_class is not None:
            infer = op_class(node.graph, {}).attrs.get("infer")
            if infer is not None:
                return infer
        reason = self.fallback.unavailable_reason() if self.fallback is not None else None

        def no_infer(n):
            raise Error("Cannot infer shape for node \"{}\" ({}): it is registered in CustomLayersMapping.xml but "
                        "{}. Run with --use-caffe-fallback to let Caffe compute its shape (needs pycaffe), or write "
                        "an extension with an infer function for op {} (--extensions).", n.name, n.caffe_type,
                        reason or "--use-caffe-fallback is off", n.caffe_type, faq=14)
        return no_infer
