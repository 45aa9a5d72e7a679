"""The convert options, written once.

OPTIONS is the one table of the Model Optimizer's options: it makes ConvertOptions
(the dataclass the pipeline reads), `mo-core convert`'s argparse groups, the copy
from the parsed arguments (ConvertOptions.from_args) and the printed summary
(summary_lines). Adding an option is one entry here; the pipeline then reads it
as `ctx.options.<name>`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

GENERAL = "framework-agnostic parameters"
REPLACEMENT = "sub-graph replacement (named as in the reference; any framework in mo-core)"
CAFFE = "Caffe-specific parameters"
TF = "TensorFlow-specific parameters"


@dataclass(frozen=True)
class Option:
    """One option: `name` is the field and argparse dest; `flags` its command-line
    spellings (default: --name); `kind` str, int, float or bool (a switch);
    `aliases` values accepted on input and stored as their canonical value."""
    name: str
    group: str
    help: str
    kind: type = str
    default: object = None
    flags: tuple[str, ...] = ()
    choices: tuple = ()
    aliases: tuple[tuple[str, str], ...] = ()
    metavar: str | None = None

    @property
    def spellings(self) -> tuple[str, ...]:
        return self.flags or ("--" + self.name,)

    def canonical(self, value):
        return dict(self.aliases).get(value, value)


OPTIONS = (
    Option("input_model", GENERAL, "the .caffemodel with trained weights, or the frozen TensorFlow graph (.pb, .pbtxt)",
           flags=("--input_model", "-m", "-w")),
    Option("framework", GENERAL, "framework of the model (deduced from the file names)", choices=("caffe", "tf")),
    Option("output_dir", GENERAL, "directory for the .xml and .bin (default: .)", default=".",
           flags=("--output_dir", "-o")),
    Option("model_name", GENERAL, "name of the IR files and of the net (default: model file name)",
           flags=("--model_name", "-n")),
    Option("input", GENERAL, "comma-separated entry points: NODE, PORT:NODE (input port) or NODE:PORT (output port); "
           "the model is cut there"),
    Option("output", GENERAL, "comma-separated exit points: NODE, NODE:PORT or PORT:NODE"),
    Option("input_shape", GENERAL, "shape(s) for the inputs in the framework's layout (NHWC for TensorFlow), "
           "e.g. [1,3,227,227] or (1,3,227,227),(1,6,1,1)"),
    Option("batch", GENERAL, "batch size for every input (overrides dim 0)", kind=int, flags=("--batch", "-b")),
    Option("mean_values", GENERAL, "per-channel means to subtract: (R,G,B) or name[R,G,B],...",
           flags=("--mean_values", "-ms")),
    Option("scale_values", GENERAL, "per-channel values to divide by: (R,G,B) or name[R,G,B],..."),
    Option("scale", GENERAL, "one value all inputs are divided by", kind=float, flags=("--scale", "-s")),
    Option("reverse_input_channels", GENERAL,
           "the IR input takes channels in reverse order (RGB <-> BGR) of the model's", kind=bool),
    Option("data_type", GENERAL, "precision of the IR weights and layers", default="FP32", choices=("FP32", "FP16"),
           aliases=(("float", "FP32"), ("half", "FP16"))),
    Option("compress_to_fp16", GENERAL, "mo 2023-2024's spelling of --data_type FP16 (mo-core's default stays FP32)",
           kind=bool),
    Option("disable_fusing", GENERAL, "keep linear ops as ScaleShift layers", kind=bool),
    Option("ir_version", GENERAL, "2: the legacy catalog's IR (our daemons); 11: opset IR for OpenVINO 2023-2026 "
           "runtimes", kind=int, default=2, choices=(2, 11)),
    Option("ov_extension_ops", GENERAL, "IR 11: write layers of these types (no opset equivalent) as the named "
           "operations of an OpenVINO extension you load at run time (VERSION default: extension)",
           metavar="TYPE[=OP_TYPE][@VERSION],..."),
    Option("extensions", GENERAL, "comma-separated directories with ops/, front/caffe/, front/tf/ and front/ "
           "extension modules (ops, extractors, replacers), or Python files"),
    Option("fallback_input", GENERAL, "a sample input (.npy: the only input; .npz: input name -> array; the "
           "framework's layout) the Caffe/TensorFlow shape-inference fallbacks run the model on, for shapes that "
           "depend on the data (default: seeded noise)", metavar="x.npy|x.npz"),
    Option("validate", GENERAL, "after writing the IR, run the model in its framework (Caffe/TensorFlow worker) and "
           "the IR on the CPU daemon on the same input and report the errors per output; exit 1 above the "
           "tolerance", kind=bool),
    Option("validate_input", GENERAL, "the input of --validate (the framework's layout; default: seeded standard "
           "normal noise); implies --validate", metavar="x.npy|x.npz"),
    Option("validate_tolerance", GENERAL, "largest accepted relative error of --validate (default 1e-4 for FP32, "
           "1e-2 for FP16); implies --validate", kind=float, metavar="REL"),
    Option("validate_layers", GENERAL, "compare every tensor the IR and the framework both have and name the first "
           "layer that diverges; implies --validate", kind=bool),
    Option("tensorflow_use_custom_operations_config", REPLACEMENT,
           "JSON file(s) describing sub-graphs to replace (match_kind scope, points or general)",
           flags=("--tensorflow_use_custom_operations_config", "--transformations_config"), metavar="FILE[,FILE]"),
    Option("tensorflow_custom_operations_config_update", REPLACEMENT,
           "fill in the inputs and outputs of FILE's scope replacements for this model, then stop (no IR is written)",
           metavar="FILE"),
    Option("tensorflow_object_detection_api_pipeline_config", REPLACEMENT,
           "the pipeline.config of a TensorFlow Object Detection API export: its values set the support JSON's "
           "replacements; without a JSON, the one that fits the graph is chosen", metavar="pipeline.config"),
    Option("input_proto", CAFFE, "the deploy .prototxt (default: the model name with .prototxt)",
           flags=("--input_proto", "-d")),
    Option("custom_layers_mapping", CAFFE, "register Caffe layers to convert as they are (legacy mode); default: "
           "core/front/caffe/CustomLayersMapping.xml if present", flags=("-k", "--k"),
           metavar="CustomLayersMapping.xml"),
    Option("use_caffe_fallback", CAFFE, "let real Caffe (in a worker process) compute the shapes of the mapped layers",
           kind=bool, flags=("--use-caffe-fallback", "--use_caffe_fallback")),
    Option("disable_omitting_optional", CAFFE,
           "write every parameter of a mapped layer, also unset ones without a default", kind=bool),
    Option("enable_flattening_nested_params", CAFFE,
           "write the fields of a mapped layer's nested parameter messages too", kind=bool),
    Option("caffe_proto", CAFFE, "the schema of the Caffe fork the model comes from (compiled at run time; its extra "
           "fields reach extractors and CustomLayersMapping rules)", metavar="caffe.proto"),
    Option("interp_zoom_rule", CAFFE, "output size of Interp layers with zoom_factor: multiply (in * zoom, the "
           "reference's default) or deeplab (in + (in - 1) * (zoom - 1), DeepLab-Caffe's); FAQ #96",
           default="multiply", choices=("multiply", "deeplab")),
    Option("freeze_placeholder_with_value", TF, "replaces placeholders with constants, e.g. "
           "\"is_training->False,keep_prob->1.0,anchors->[1 2 3 4]\" (the placeholder's dtype and shape)",
           metavar="NAME->VALUE,..."),
    Option("input_model_is_text", TF, "the --input_model graph is in the protobuf text format (.pbtxt)", kind=bool),
    Option("disable_nhwc_to_nchw", TF, "keep the model's 4-D inputs and outputs NHWC (the IR converts inside)",
           kind=bool),
    Option("saved_model_dir", TF, "a SavedModel directory (frozen by the TensorFlow worker: needs TensorFlow there, "
           "MO_CORE_TF_PYTHON chooses its python)"),
    Option("saved_model_tags", TF, "comma-separated tags of the SavedModel's meta graph (default: serve)"),
    Option("saved_model_signature", TF, "the signature of --saved_model_dir to convert (default: serving_default, "
           "or the only one)", metavar="NAME"),
    Option("input_meta_graph", TF, "a TF1 .meta graph, frozen with its checkpoint by the TensorFlow worker"),
    Option("input_checkpoint", TF, "the checkpoint of --input_meta_graph (default: its path without .meta) or of a "
           "non-frozen --input_model"),
    Option("tensorflow_subgraph_patterns", TF, "offload to TensorFlow the nodes whose names match (whole name); each "
           "pattern makes one TFCustomSubgraphCall layer (CPU only, run by a TF worker of the daemon)",
           metavar="REGEX,..."),
    Option("tensorflow_operation_patterns", TF, "offload to TensorFlow the nodes whose op types match; all matches "
           "of a pattern make one TFCustomSubgraphCall layer", metavar="REGEX,..."),
    Option("offload_unsupported_operations_to_tf", TF,
           "offload every connected sub-graph of ops the converter does not support to TensorFlow", kind=bool),
)


def _field(option: Option):
    default = False if option.kind is bool else option.default
    annotation = option.kind if default is not None else option.kind | None
    return option.name, annotation, dataclasses.field(default=default)


def _post_init(self):
    for option in OPTIONS:  # aliases become their canonical value here, once (e.g. half -> FP16)
        if option.aliases:
            setattr(self, option.name, option.canonical(getattr(self, option.name)))
    if self.compress_to_fp16:
        self.data_type = "FP16"


def true_or_false(text: str) -> bool:  # (SWITCH's type)
    """The value of a switch written with one, as mo's are (--reverse_input_channels=True)."""
    value = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(text.strip().lower())
    if value is None:
        raise ValueError(text)
    return value


# argparse's keywords of a switch: --name, or --name=True / False as mo writes them
SWITCH = {"nargs": "?", "const": True, "default": False, "type": true_or_false, "metavar": "True|False"}


def _from_args(cls, args):
    """The options of an argparse namespace made by add_arguments."""
    return cls(**{option.name: getattr(args, option.name) for option in OPTIONS})


ConvertOptions = dataclasses.make_dataclass(
    "ConvertOptions", [_field(option) for option in OPTIONS],
    namespace={"__post_init__": _post_init, "from_args": classmethod(_from_args),
               "__doc__": "The options of one conversion (core/convert_options.py: OPTIONS)."})
ConvertOptions.__module__ = __name__


def add_arguments(parser) -> dict:
    """OPTIONS as argparse argument groups of `parser` (`mo-core convert`); returns
    the groups by title."""
    groups = {}
    for option in OPTIONS:
        if option.group not in groups:
            groups[option.group] = parser.add_argument_group(option.group)
        kwargs = {"dest": option.name, "help": option.help}
        if option.kind is bool:  # --switch, or --switch=True / False as mo writes them
            kwargs.update(SWITCH)
        else:
            kwargs.update(type=option.kind, default=option.default)
            if option.choices:
                kwargs["choices"] = tuple(option.choices) + tuple(alias for alias, _ in option.aliases)
            if option.metavar:
                kwargs["metavar"] = option.metavar
        groups[option.group].add_argument(*option.spellings, **kwargs)
    return groups


def summary_lines(options) -> list[str]:
    """The options that are set, one `name: value` line each (the reference's
    "Model Optimizer arguments")."""
    lines = []
    for option in OPTIONS:
        value = getattr(options, option.name)
        if value not in (None, False):
            lines.append("\t- {:<26}{}".format(option.name + ": ", value))  # a space after the longest names too
    return lines
