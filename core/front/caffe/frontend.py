"""The Caffe front end as the pipeline sees it (core/pipeline.py): load the model
into a graph, extract every layer into an IR op. Caffe extractors make IR ops
directly in Caffe's NCHW layout, so the framework-specific steps after shape
inference have nothing to do."""
from __future__ import annotations

import os

from core.errors import Error


class CaffeFrontEnd:
    name = "caffe"

    def check_options(self, o):
        if not o.input_proto and o.input_model:
            guess = os.path.splitext(o.input_model)[0] + ".prototxt"
            if os.path.isfile(guess):
                o.input_proto = guess
        if not o.input_model:
            raise Error("--input_model is required: the .caffemodel with the trained weights (FAQ #2 tells how to "
                        "make one from a prototxt).", faq=20)

    def load(self, ctx):
        from core.front.caffe import extractors  # noqa: F401  (registers the standard extractors)
        from core.front.caffe.builder import build_graph
        from core.front.caffe.custom_mapping import CustomLayersMapping
        from core.front.caffe.fallback import CaffeFallback
        from core.front.caffe.loader import load_caffemodel, load_prototxt
        o = ctx.options
        if o.caffe_proto:
            from core.front.caffe.user_proto import load_schema
            net = load_prototxt(o.input_proto, load_schema(o.caffe_proto), schema_path=o.caffe_proto)
        else:
            net = load_prototxt(o.input_proto)
        model = load_caffemodel(o.input_model)
        ctx.graph = build_graph(net, model)
        ctx.graph.graph["interp_zoom_rule"] = o.interp_zoom_rule
        dirs = [os.path.dirname(os.path.abspath(p)) for p in (o.input_proto, o.input_model)]
        ctx.caffe_fallback = CaffeFallback(o.use_caffe_fallback, os.path.abspath(o.input_model), dirs,
                                           source=o.fallback_input, modules=_python_layer_modules(net))
        if o.fallback_input and not o.use_caffe_fallback:
            raise Error("--fallback_input is the input the Caffe fallback runs the model on: it needs "
                        "--use-caffe-fallback (and a CustomLayersMapping.xml, -k).")
        ctx.custom_mapping = CustomLayersMapping.load(
            o.custom_layers_mapping, explicit=bool(o.custom_layers_mapping), warnings=ctx.warnings,
            disable_omitting_optional=o.disable_omitting_optional,
            enable_flattening_nested_params=o.enable_flattening_nested_params, fallback=ctx.caffe_fallback)
        if o.use_caffe_fallback and ctx.custom_mapping is None:
            raise Error("--use-caffe-fallback needs a CustomLayersMapping.xml (-k FILE) that registers the layers "
                        "Caffe should infer.")

    def extract(self, graph, ctx, report_unsupported: bool = True):
        from core.front.caffe.extract import extract_all
        extract_all(graph, ctx.custom_mapping, report_unsupported=report_unsupported)
        if ctx.options.fallback_input and ctx.caffe_fallback is not None:
            from core.front.sample_input import load_sample_inputs
            names = [n.name for n in graph.op_nodes(op="Parameter")]
            ctx.caffe_fallback.given = load_sample_inputs(ctx.options.fallback_input, "--fallback_input", names)

    def report_unsupported(self, graph):
        """Layers still without an op after the front replacements: one error for all."""
        from core.front.caffe.extract import unsupported_layers_error
        left = [node for node in graph.op_nodes() if not node.has("op")]
        if left:
            raise unsupported_layers_error(left)

    def replace_patterns(self, ctx):
        """Nothing: Caffe layers map one to one."""

    def lower(self, ctx):
        """Nothing: the extractors already made IR ops in NCHW."""

    def model_name(self, o) -> str:
        return os.path.splitext(os.path.basename(o.input_model))[0]

    def source_files(self, o) -> dict:
        return {"input_model": os.path.abspath(o.input_model), "input_proto": os.path.abspath(o.input_proto)}


def _python_layer_modules(net) -> list[str]:
    """The modules the prototxt's Python layers name (a fork's schema may lack the field)."""
    modules = set()
    for layer in getattr(net, "layer", ()):
        try:
            if layer.type == "Python" and layer.python_param.module:
                modules.add(layer.python_param.module)
        except AttributeError:
            pass
    return sorted(modules)
