"""The conversion pipeline: one explicit, ordered list of passes (PIPELINE).

Each pass is a function of the conversion context. Nothing registers itself into
this order: to see what runs, and when, read PIPELINE.
"""
from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field

import networkx as nx

from core.convert_options import ConvertOptions
from core.errors import Error
from core.front import cutting
from core.front.cli_values import parse_values, split_input_entries, split_names

log = logging.getLogger("mo_core")


@dataclass
class Context:
    options: ConvertOptions
    front: object = None        # the framework's front end (core/front/<framework>/frontend.py)
    graph: object = None
    network: object = None
    v11_model: object = None                     # ir.v11.Model when --ir_version 11
    new_inputs: list = field(default_factory=list)
    custom_mapping: object = None
    caffe_fallback: object = None
    warnings: list = field(default_factory=list)
    timings: list = field(default_factory=list)
    stop_message: str | None = None              # a step ended the conversion early, on purpose (no IR)
    support_json: str | None = None              # the OD API support JSON chosen from the graph
    preprocess: tuple = ({}, {})                 # (--mean_values, --scale_values) by IR input name (or None)
    input_shapes: list | None = None             # --input's own [SHAPE]s, one (or None) per entry


# --- passes -------------------------------------------------------------------
TF_SUFFIXES = (".pb", ".pbtxt", ".frozen", ".graphdef")


def front_end(framework: str):
    if framework == "caffe":
        from core.front.caffe.frontend import CaffeFrontEnd
        return CaffeFrontEnd()
    from core.front.tf.frontend import TFFrontEnd
    return TFFrontEnd()


def deduce_framework(ctx):
    o = ctx.options
    if o.model_name is not None and (not o.model_name.strip() or "/" in o.model_name or os.sep in o.model_name
                                     or o.model_name in (".", "..")):
        raise Error("--model_name {!r} must be a file name (no '/'): it names the IR's files, which go to "
                    "--output_dir.", o.model_name)
    tf_only = (o.saved_model_dir or o.input_meta_graph or o.input_checkpoint or o.saved_model_tags or
               o.saved_model_signature or o.input_model_is_text)
    if not o.input_model and not o.input_proto and not tf_only:
        raise Error("Nothing to convert: give the trained model with --input_model (a Caffe .caffemodel with its "
                    "--input_proto deploy.prototxt, or a frozen TensorFlow graph .pb), or a TensorFlow "
                    "--saved_model_dir or --input_meta_graph.", faq=20)
    if o.framework is None:
        model = (o.input_model or "").lower()
        if model.endswith(".caffemodel") or o.input_proto:
            o.framework = "caffe"
        elif model.endswith(TF_SUFFIXES) or tf_only:
            o.framework = "tf"
        else:
            raise Error("Framework name can not be deduced from the given options. Use --framework to choose one of "
                        "caffe, tf (.caffemodel means Caffe, .pb/.pbtxt TensorFlow).", faq=15)
    if o.framework not in ("caffe", "tf"):
        raise Error("Framework '{}' is not supported: mo-core converts Caffe (--framework caffe) and TensorFlow "
                    "(--framework tf) models.", o.framework, faq=15)
    ctx.front = front_end(o.framework)
    ctx.front.check_options(o)
    from core.middle.precision import ir_precision
    from ir.interp import ZOOM_RULES
    ir_precision(o.data_type)  # bad values fail before any work
    if o.interp_zoom_rule not in ZOOM_RULES:
        raise Error("--interp_zoom_rule must be one of {}, got '{}'.", ", ".join(ZOOM_RULES), o.interp_zoom_rule)
    if o.ir_version not in (2, 11):
        raise Error("--ir_version must be 2 or 11, got '{}'.", o.ir_version)
    if o.validate_layers or o.validate_input or o.validate_tolerance is not None:
        o.validate = True  # (they say what --validate does)
    if o.validate and o.ir_version != 2:
        raise Error("--validate runs the IR on the CPU daemon, which runs IR version 2: leave out --ir_version 11 "
                    "(or validate an IR version 2 of the same model).")
    if o.validate_tolerance is not None and not o.validate_tolerance > 0:
        raise Error("--validate_tolerance must be a positive relative error, got {}.", o.validate_tolerance)
    if o.framework != "tf" and (o.tensorflow_subgraph_patterns or o.tensorflow_operation_patterns or
                                o.offload_unsupported_operations_to_tf):
        raise Error("--tensorflow_subgraph_patterns, --tensorflow_operation_patterns and "
                    "--offload_unsupported_operations_to_tf offload TensorFlow sub-graphs: the model is {}.",
                    o.framework)
    if o.ov_extension_ops and o.ir_version != 11:
        raise Error("--ov_extension_ops names OpenVINO extension operations for IR version 11; add --ir_version 11.")


def load_extensions(ctx):
    if ctx.options.extensions:
        from core.extensions import load_extension_dirs
        load_extension_dirs(split_names(ctx.options.extensions))


def expand_input_entries(ctx):
    """mo's --input NAME[SHAPE]{TYPE}->VALUE: the shapes go with the entries, a ->VALUE freezes that input
    (as --freeze_placeholder_with_value), and --input keeps the names of the inputs that remain (an input
    that either freezes is no input)."""
    o = ctx.options
    entries = split_input_entries(o.input)
    if not entries:
        return
    frozen = [e for e in entries if e.value is not None]
    if frozen:
        more = ",".join("{}->{}".format(e.name, e.value) for e in frozen)
        o.freeze_placeholder_with_value = ",".join(filter(None, (o.freeze_placeholder_with_value, more)))
    from core.front.tf.freeze_inputs import parse as frozen_names
    gone = set(frozen_names(o.freeze_placeholder_with_value)) if o.freeze_placeholder_with_value else set()
    kept = [e for e in entries if e.value is None and e.name not in gone]
    if any(e.shape is not None for e in kept):
        if o.input_shape:
            raise Error("Shapes are given both in --input and with --input_shape; give them in one place.", faq=57)
        ctx.input_shapes = [e.shape for e in kept]
    o.input = ",".join(e.name for e in kept) or None


def load_model(ctx):
    if ctx.options.freeze_placeholder_with_value and ctx.options.framework != "tf":
        raise Error("--freeze_placeholder_with_value freezes the Placeholders of a TensorFlow model; a Caffe "
                    "model's inputs cannot be frozen (cut the model with --input instead).")
    ctx.front.load(ctx)


def cut_outputs(ctx):
    cutting.apply_outputs(ctx.graph, ctx.options.output)


def cut_inputs(ctx):
    o = ctx.options
    ctx.new_inputs = cutting.parse_inputs(ctx.graph, o.input, o.input_shape, o.batch, ctx.input_shapes)

    def infer_shapes_of(data_ids):
        # shapes of new inputs come from the original model up to the cut
        keep = set(data_ids)
        for d in data_ids:
            keep |= nx.ancestors(ctx.graph, d)
        sub = ctx.graph.subgraph(keep).copy()
        from core.middle.shape_infer import partial_infer
        ctx.front.extract(sub, ctx)
        cutting.set_input_shapes(sub, [], o.batch)
        partial_infer(sub)
        return {d: sub.nodes[d]["shape"] for d in data_ids}

    cutting.cut_inputs(ctx.graph, ctx.new_inputs, infer_shapes_of, inputs_named=bool(o.input))


def extract(ctx):
    # layers no extractor knows are reported after the front replacements, which may replace them
    ctx.front.extract(ctx.graph, ctx, report_unsupported=False)


def front_replacements(ctx):
    """Op, pattern and configuration-file replacers (core/front/replacement/runner.py),
    after extraction and before shape inference, as the reference guide orders them."""
    from core.front.replacement.runner import run_front_replacements
    o = ctx.options
    ctx.graph.graph["cmd_params"] = o
    configs = split_names(o.tensorflow_use_custom_operations_config)
    if o.framework == "tf":
        from core.front.tf.object_detection.choose import prepare
        # the pipeline config; with no JSON given, the support JSON that fits the export
        configs, ctx.support_json = prepare(ctx.graph, o, configs)
    ctx.stop_message = run_front_replacements(ctx.graph, o.framework, configs,
                                              o.tensorflow_custom_operations_config_update, ctx.warnings)


def report_unsupported(ctx):
    """Every layer that neither an extractor nor a replacer handled, in one error."""
    ctx.front.report_unsupported(ctx.graph)


def check_blob_values(ctx):
    from core.middle.blob_values import warn_non_finite
    warn_non_finite(ctx.graph, ctx.warnings)


def set_input_shapes(ctx):
    cutting.set_input_shapes(ctx.graph, ctx.new_inputs, ctx.options.batch)


def infer_shapes(ctx):
    from core.middle.shape_infer import partial_infer
    partial_infer(ctx.graph)


def caffe_broadcasts(ctx):
    """Caffe Scale/Bias with a second input of fewer axes: Reshape + Tile to the first's shape."""
    from core.middle.caffe_broadcast import expand_axis_broadcasts
    expand_axis_broadcasts(ctx.graph)


def replace_patterns(ctx):
    """TensorFlow: sub-graphs that are one IR layer (atrous convolution, leaky ReLU, l2 normalization, zero
    padding into the convolution or pooling after it); Caffe: nothing."""
    ctx.front.replace_patterns(ctx)


def lower_to_ir(ctx):
    """TensorFlow: framework ops become IR layers and 4-D tensors NCHW; Caffe: nothing (its extractors make IR
    ops directly)."""
    ctx.front.lower(ctx)


def record_framework_tensors(ctx):
    """--validate: which tensor of the IR is which tensor of the framework (core/validate.py)."""
    if ctx.options.validate:
        from core.validate import record_framework_tensors as run
        graph_def = ctx.graph.graph.get("tf_graph_def")
        run(ctx.graph, ctx.options.framework, {n.name for n in graph_def.node} if graph_def is not None else None)


def check_framework_tensors(ctx):
    """--validate: forget the tensors whose layer an optimization changed (before the precision pass)."""
    if ctx.options.validate:
        from core.validate import check_framework_tensors as run
        run(ctx.graph)


def remove_identities(ctx):
    from core.middle.identity import remove_identities as run
    run(ctx.graph)


def preprocessing(ctx):
    from core.middle.preprocessing import add_preprocessing
    o = ctx.options
    if o.scale is not None and o.scale_values:
        raise Error("Both --scale and --scale_values are defined. Specify either scale factor or scale values per "
                    "input channels.", faq=19)
    if o.scale is not None and o.scale == 0:
        raise Error("--scale must not be 0: the input would be divided by zero.", faq=97)
    if o.scale is not None and not math.isfinite(o.scale):
        raise Error("--scale {} is not a finite number.", o.scale, faq=97)
    names = [n for s in ctx.new_inputs for n in s.input_names or [s.name]] if o.input else []
    mean = _input_names(ctx, parse_values(o.mean_values, "--mean_values", names, faq_parse=58, faq_names=60,
                                          faq_count=62))
    scale = _input_names(ctx, parse_values(o.scale_values, "--scale_values", names, faq_parse=58, faq_names=61,
                                           faq_count=63))
    ctx.preprocess = (mean, scale)  # (--validate applies them to the framework's input)
    ctx.warnings += add_preprocessing(ctx.graph, mean, scale, o.scale, o.reverse_input_channels,
                                      fusing=not o.disable_fusing)


def _input_names(ctx, values: dict) -> dict:
    """Values named as the user may name an input: the IR input's name, its tensor name
    (NAME:0) or the --input entry that made it (relu1:0, 0:relu1), as the reference took them."""
    aliases = {s.text: s.input_names[0] for s in ctx.new_inputs if len(s.input_names or ()) == 1}
    for param in ctx.graph.op_nodes(op="Parameter"):
        aliases.setdefault(param.name + ":0", param.name)
    known = {param.name for param in ctx.graph.op_nodes(op="Parameter")}
    return {name if name in known else aliases.get(name, name): v for name, v in values.items()}


def lower_batch_norm(ctx):
    from core.middle.linear_lowering import lower_batch_norm as run
    run(ctx.graph, fusing=not ctx.options.disable_fusing)


def decompose_scale_shift(ctx):
    if not ctx.options.disable_fusing:
        from core.middle.linear_lowering import decompose_scale_shift as run
        run(ctx.graph)


def fold_reverse_channels(ctx):
    from core.middle.preprocessing import fold_reverse_channels as run
    run(ctx.graph)


def fuse_linear(ctx):
    if not ctx.options.disable_fusing:
        from core.middle.fusing import fuse_linear_ops
        fuse_linear_ops(ctx.graph)


def leftover_linear(ctx):
    from core.middle.fusing import linear_to_scale_shift
    linear_to_scale_shift(ctx.graph)


def constant_folding(ctx):
    from core.middle.const_fold import fold_constants
    fold_constants(ctx.graph)


def hoist_projections(ctx):
    """An unrolled recurrent layer's per-step input products made one product of all steps
    (core/middle/recurrent.py; a fusion: not with --disable_fusing)."""
    if not ctx.options.disable_fusing:
        from core.middle.recurrent import hoist_projections as run
        run(ctx.graph)


def remove_dead_code(ctx):
    cutting.remove_dead(ctx.graph)


def fold_moves(ctx):
    """Biases and scales behind Reshapes/Permutes folded into their FullyConnected or Convolution (a fusion:
    not with --disable_fusing), Permutes/Reshapes moved up to meet others, and consecutive ones made one
    (core/middle/move_fold.py)."""
    from core.middle.move_fold import simplify_moves
    simplify_moves(ctx.graph, fuse=not ctx.options.disable_fusing)


def fold_shuffles(ctx):
    """A Split + Concat that only reorders the last axis (the OD API's box coder swap) folded into the weights
    of the layers producing the tensor (core/middle/shuffle_fold.py)."""
    from core.middle.shuffle_fold import fold_shuffles as run
    run(ctx.graph)


def set_precision(ctx):
    from core.middle.precision import set_precision as run
    run(ctx.graph, ctx.options.data_type, ctx.warnings)


def keep_caffe_definitions(ctx):
    # a layer that keeps its Caffe type (CustomLayersMapping) carries its own Caffe
    # definition in the IR, so the daemon runs it without the source files
    if ctx.custom_mapping is None:
        return
    from core.front.caffe.fallback import layer_definition
    from core.services.caffe_worker import DEFINITION_ATTR
    for node in ctx.graph.op_nodes():
        if ctx.custom_mapping.handles(node) and node.soft_get("type") == node.caffe_type and "pb" in node:
            node["caffe_definition"] = layer_definition(node.pb)
            node["backend_attrs"] = list(node.backend_attrs) + [(DEFINITION_ATTR, lambda n: n.caffe_definition)]


def emit(ctx):
    from core.emit import to_network
    o = ctx.options
    name = o.model_name or ctx.front.model_name(o)
    ctx.network = to_network(ctx.graph, name, ctx.warnings)
    if o.input:
        ctx.network.input_order = [n for s in ctx.new_inputs for n in s.input_names or [s.name]]
    # like the legacy tool's <cli_parameters>: where the IR came from (information
    # only: nothing reads these paths back)
    meta = {"generator": "mo-core 0.1.0", "framework": o.framework, **ctx.front.source_files(o)}
    for key, value in sorted(vars(o).items()):
        if key not in meta and value not in (None, False, "") and not (key == "output_dir"):
            meta["cli_" + key] = str(value)
    ctx.network.meta = meta


def emit_ir_v11(ctx):
    # the same network mapped to opset operations; layers with no opset equivalent
    # are reported here, before anything is written
    if ctx.options.ir_version == 11:
        from ir.v11 import build_model, parse_extension_ops
        o = ctx.options
        ctx.v11_model, warnings = build_model(ctx.network, data_type=o.data_type,
                                              extension_ops=parse_extension_ops(o.ov_extension_ops))
        ctx.warnings += warnings


PIPELINE = [
    deduce_framework,
    load_extensions,
    expand_input_entries,
    load_model,
    cut_outputs,
    cut_inputs,
    extract,
    front_replacements,
    report_unsupported,
    set_input_shapes,
    infer_shapes,
    caffe_broadcasts,
    check_blob_values,  # (after shape inference: a TensorFlow Const's value is known from then on)
    replace_patterns,
    lower_to_ir,
    record_framework_tensors,
    remove_identities,
    preprocessing,
    lower_batch_norm,
    decompose_scale_shift,
    fold_reverse_channels,
    fuse_linear,
    leftover_linear,
    constant_folding,
    hoist_projections,
    remove_dead_code,
    fold_moves,
    fold_shuffles,
    check_framework_tensors,
    set_precision,
    keep_caffe_definitions,
    emit,
    emit_ir_v11,
]


def convert(options: ConvertOptions) -> Context:
    """Runs PIPELINE and returns the context holding the ir.Network (not yet written)."""
    from core.extensions import registries_snapshot, restore_registries
    # --extensions replace registry entries for this conversion only
    saved = registries_snapshot()
    ctx = Context(options)
    try:
        for step in PIPELINE:
            start = time.perf_counter()
            try:
                step(ctx)
            except SystemExit as exc:  # only user code (extensions) can get here
                from core.extensions import user_exit_error
                raise user_exit_error(exc, step.__name__) from None
            ctx.timings.append((step.__name__, time.perf_counter() - start))
            log.debug("pass %-24s %.3f s", step.__name__, ctx.timings[-1][1])
            if ctx.stop_message:
                break
    finally:
        restore_registries(saved)
    return ctx
