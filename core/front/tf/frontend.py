"""The TensorFlow front end as the pipeline sees it (core/pipeline.py).

load: a frozen GraphDef (.pb, or .pbtxt with --input_model_is_text) read with our
own schema, no TensorFlow (a SavedModel, a meta graph or a graph with a
checkpoint is frozen by the TF worker first: core/front/tf/freeze.py); extract:
every node gets its TensorFlow semantics (core/front/tf/ops) or a user
extension's op; the offload options turn sub-graphs into TFCustomSubgraphCall
nodes (core/front/tf/offload.py), and what is left after the front replacements
and the offload is reported at once; shape inference then runs in TensorFlow's
layout, asking the TF worker for the nodes only TensorFlow can compute
(core/front/tf/fallback.py); replace_patterns:
sub-graphs that are one IR layer (core/front/tf/patterns.py); lower: TF ops ->
IR layers, NHWC -> NCHW (core/front/tf/lowering.py).
"""
from __future__ import annotations

import logging
import os

from core.errors import Error

log = logging.getLogger("mo_core")


class TFFrontEnd:
    name = "tf"

    offload_unsupported = False
    loops_left: list | tuple = ()  # the while loops the unroller left whole (load): warned of if replacements left them

    def check_options(self, o):
        self.offload_unsupported = bool(o.offload_unsupported_operations_to_tf)
        if o.input_proto:
            raise Error("--input_proto is a Caffe option; a TensorFlow model is one file (--input_model) or a "
                        "SavedModel directory (--saved_model_dir).")
        sources = [name for name, value in (("--input_model", o.input_model), ("--saved_model_dir", o.saved_model_dir),
                                            ("--input_meta_graph", o.input_meta_graph)) if value]
        if len(sources) > 1:
            raise Error("{} and {} name two models; give one (a frozen graph, a SavedModel directory or a meta "
                        "graph).", sources[0], sources[1])
        if o.input_checkpoint and not (o.input_model or o.input_meta_graph):
            raise Error("--input_checkpoint fills the variables of --input_model or --input_meta_graph; give one of "
                        "them.")
        if o.saved_model_tags and not o.saved_model_dir:
            raise Error("--saved_model_tags selects a meta graph of --saved_model_dir; give the SavedModel too.")
        if o.saved_model_signature is not None and not o.saved_model_dir:
            raise Error("--saved_model_signature selects a signature of --saved_model_dir; give the SavedModel too.")
        if not sources:
            raise Error("No TensorFlow model given: --input_model (a frozen graph .pb, or a .pbtxt with "
                        "--input_model_is_text), --saved_model_dir or --input_meta_graph.", faq=42)
        if o.saved_model_dir and not os.path.isdir(o.saved_model_dir):
            raise Error("--saved_model_dir '{}' is not a directory: give the SavedModel's directory (the one holding "
                        "saved_model.pb and variables/).", o.saved_model_dir)
        for name, path in (("--input_meta_graph", o.input_meta_graph), ("--input_model", o.input_model)):
            if path and not os.path.isfile(path):
                raise Error("{} '{}' does not exist. Check the path.", name, path, faq=42)

    def load(self, ctx):
        from core.front.tf.builder import build_graph
        from core.front.tf.loader import load_graph_def
        o = ctx.options
        if o.saved_model_dir or o.input_meta_graph or o.input_checkpoint:
            from core.front.tf.freeze import frozen_graph_def
            graph_def = frozen_graph_def(o)  # TensorFlow, in the TF worker
        else:
            graph_def = load_graph_def(o.input_model, o.input_model_is_text)
        if o.freeze_placeholder_with_value:  # (first: a tf.cond on a frozen placeholder inlines one branch)
            from core.front.tf.freeze_inputs import freeze_placeholders
            freeze_placeholders(graph_def, o.freeze_placeholder_with_value)
        from core.front.tf.inline_calls import inline_calls
        inline_calls(graph_def)  # (Keras' grouped Conv2D is a function call of its own)
        from core.front.tf.constant_cond import resolve_constant_switches, switch_placeholders
        resolve_constant_switches(graph_def)  # tf.cond on a constant: one branch left
        from core.front.tf.offload import parse_patterns
        from core.front.tf.loops.unroll import unroll_loops
        named = [(p, "name") for p in parse_patterns(o.tensorflow_subgraph_patterns, "--tensorflow_subgraph_patterns")]
        named += [(p, "op") for p in parse_patterns(o.tensorflow_operation_patterns, "--tensorflow_operation_patterns")]
        # while loops of a fixed trip count (Keras' LSTM / GRU): their body once per step; not those the user offloads
        offloaded = lambda node: any(p.fullmatch(getattr(node, key)) for p, key in named)  # noqa: E731
        outputs_read, self.loops_left = unroll_loops(graph_def, offloaded, _one_input_shape(graph_def, o))
        for name in switch_placeholders(graph_def):
            log.warning("The graph branches on the placeholder '%s' (TF1 control flow: Switch/Merge), which no IR "
                        "holds; if it is a training switch, give it its inference value, e.g. "
                        "--freeze_placeholder_with_value \"%s->False\", and one branch is kept.", name, name)
        ctx.graph = build_graph(graph_def, o.input_model or o.saved_model_dir or o.input_meta_graph, outputs_read)
        # the TF worker's fallback: the model's own NodeDefs (and function library) rebuild what it computes
        from core.front.tf.fallback import TFShapeFallback
        ctx.graph.graph["tf_graph_def"] = graph_def
        ctx.graph.graph["shape_fallback"] = TFShapeFallback(source=o.fallback_input)

    def extract(self, graph, ctx, report_unsupported: bool = True):
        from core.front.tf.extract import extract_all
        from core.front.tf.offload import offload_by_patterns
        o = ctx.options
        graph.graph["offload_unsupported"] = o.offload_unsupported_operations_to_tf
        self._sample_input(graph, o)
        offload_by_patterns(graph, o.tensorflow_subgraph_patterns, o.tensorflow_operation_patterns)
        extract_all(graph, report_unsupported=False)
        if report_unsupported:
            self.report_unsupported(graph)

    def report_unsupported(self, graph):
        """Nodes still without TensorFlow semantics or an op after the front replacements: one error for all,
        or, with --offload_unsupported_operations_to_tf, TFCustomSubgraphCall nodes."""
        from core.front.tf.extract import unsupported_nodes, unsupported_ops_error
        left = unsupported_nodes(graph)
        names = {node.soft_get("name") for node in left}
        for loop, why, members in self.loops_left:
            if names & members:
                log.warning("The while loop '%s' is left as it is (TensorFlow runs it with "
                            "--offload_unsupported_operations_to_tf): it cannot be unrolled, as %s.", loop, why)
        self.loops_left = ()
        if left and self.offload_unsupported:
            from core.front.tf.offload import offload_unsupported
            offload_unsupported(graph, left)
        elif left:
            raise unsupported_ops_error(left)

    @staticmethod
    def _sample_input(graph, o):
        fallback = graph.graph.get("shape_fallback")
        if o.fallback_input and fallback is not None:
            from core.front.sample_input import load_sample_inputs
            names = [n.name for n in graph.op_nodes(op="Parameter")]
            fallback.given = load_sample_inputs(o.fallback_input, "--fallback_input", names)

    def replace_patterns(self, ctx):
        from core.front.tf.patterns import replace_patterns
        replace_patterns(ctx.graph)

    def lower(self, ctx):
        from core.front.tf.lowering import lower_to_ir
        lower_to_ir(ctx.graph, keep_nhwc=ctx.options.disable_nhwc_to_nchw)

    def model_name(self, o) -> str:
        if o.saved_model_dir:
            return os.path.basename(os.path.normpath(o.saved_model_dir))
        path = o.input_meta_graph or o.input_model
        return os.path.splitext(os.path.basename(path))[0]

    def source_files(self, o) -> dict:
        return {key: os.path.abspath(path) for key, path in (
            ("input_model", o.input_model), ("saved_model_dir", o.saved_model_dir),
            ("input_meta_graph", o.input_meta_graph), ("input_checkpoint", o.input_checkpoint)) if path}


def _one_input_shape(graph_def, o) -> dict:
    """{Placeholder: --input_shape} for a model of one input and one shape given without --input (a loop over its
    time steps can then be unrolled); {} otherwise: the shapes are matched to inputs later (core/front/cutting.py)."""
    from core.front.cli_values import parse_input_shapes
    from core.front.tf.constant_cond import read_names
    shapes = parse_input_shapes(o.input_shape) if o.input_shape and not o.input else []
    read = read_names(graph_def.node)
    inputs = [n.name for n in graph_def.node if n.op == "Placeholder" and n.name in read]
    return {inputs[0]: [int(d) for d in shapes[0]]} if len(shapes) == 1 == len(inputs) else {}
