"""The TensorFlow front end as the pipeline sees it (core/pipeline.py).

load: a frozen GraphDef (.pb, or .pbtxt with --input_model_is_text) read with our
own schema, no TensorFlow; extract: every node gets its TensorFlow semantics
(core/front/tf/ops) or a user extension's op, all unsupported ops reported at
once; shape inference then runs in TensorFlow's layout; replace_patterns:
sub-graphs that are one IR layer (core/front/tf/patterns.py); lower: TF ops ->
IR layers, NHWC -> NCHW (core/front/tf/lowering.py).
"""
from __future__ import annotations

import os

from core.errors import Error


class TFFrontEnd:
    name = "tf"

    def check_options(self, o):
        if not o.input_model:
            raise Error("--input_model is required: the frozen TensorFlow graph (.pb, or .pbtxt with "
                        "--input_model_is_text).", faq=42)
        if o.input_proto:
            raise Error("--input_proto is a Caffe option; a TensorFlow model is one file (--input_model).")

    def load(self, ctx):
        from core.front.tf.builder import build_graph
        from core.front.tf.loader import load_graph_def
        o = ctx.options
        graph_def = load_graph_def(o.input_model, o.input_model_is_text)
        ctx.graph = build_graph(graph_def, o.input_model)

    def extract(self, graph, ctx):
        from core.front.tf.extract import extract_all
        extract_all(graph)

    def replace_patterns(self, ctx):
        from core.front.tf.patterns import replace_patterns
        replace_patterns(ctx.graph)

    def lower(self, ctx):
        from core.front.tf.lowering import lower_to_ir
        lower_to_ir(ctx.graph, keep_nhwc=ctx.options.disable_nhwc_to_nchw)

    def source_files(self, o) -> dict:
        return {"input_model": os.path.abspath(o.input_model)}
