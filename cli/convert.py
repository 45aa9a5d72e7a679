"""`mo-core convert`: the Model Optimizer's options (Caffe and TensorFlow front ends)."""
import logging
import os
import time

from core.errors import Error


def add_parser(sub):
    p = sub.add_parser("convert", help="convert a Caffe or TensorFlow model into IR (.xml + .bin), version 2 or 11",
                       description="Convert a trained Caffe or TensorFlow model into an optimized Intermediate "
                                   "Representation.")
    g = p.add_argument_group("framework-agnostic parameters")
    g.add_argument("--input_model", "-m", "-w",
                   help="the .caffemodel with trained weights, or the frozen TensorFlow graph (.pb, .pbtxt)")
    g.add_argument("--framework", choices=["caffe", "tf"], help="framework of the model (deduced from the file names)")
    g.add_argument("--output_dir", "-o", default=".", help="directory for the .xml and .bin (default: .)")
    g.add_argument("--model_name", "-n", help="name of the IR files and of the net (default: model file name)")
    g.add_argument("--input", help="comma-separated entry points: NODE, PORT:NODE (input port) or NODE:PORT "
                   "(output port); the model is cut there")
    g.add_argument("--output", help="comma-separated exit points: NODE, NODE:PORT or PORT:NODE")
    g.add_argument("--input_shape", help="shape(s) for the inputs in the framework's layout (NHWC for TensorFlow), "
                   "e.g. [1,3,227,227] or (1,3,227,227),(1,6,1,1)")
    g.add_argument("--batch", "-b", type=int, help="batch size for every input (overrides dim 0)")
    g.add_argument("--mean_values", "-ms", help="per-channel means to subtract: (R,G,B) or name[R,G,B],...")
    g.add_argument("--scale_values", help="per-channel values to divide by: (R,G,B) or name[R,G,B],...")
    g.add_argument("--scale", "-s", type=float, help="one value all inputs are divided by")
    g.add_argument("--reverse_input_channels", action="store_true",
                   help="the IR input takes channels in reverse order (RGB <-> BGR) of the model's")
    g.add_argument("--data_type", choices=["FP32", "FP16", "float", "half"], default="FP32",
                   help="precision of the IR weights and layers")
    g.add_argument("--disable_fusing", action="store_true", help="keep linear ops as ScaleShift layers")
    g.add_argument("--ir_version", type=int, choices=[2, 11], default=2,
                   help="2: the legacy catalog's IR (our daemons); 11: opset IR for OpenVINO 2023-2026 runtimes")
    g.add_argument("--ov_extension_ops", metavar="TYPE[=OP_TYPE][@VERSION],...",
                   help="IR 11: write layers of these types (no opset equivalent) as the named operations of an "
                        "OpenVINO extension you load at run time (VERSION default: extension)")
    g.add_argument("--extensions", help="comma-separated directories with ops/, front/caffe/, front/tf/ and front/ "
                   "extension modules (ops, extractors, replacers), or Python files")
    g.add_argument("--fallback_input", metavar="x.npy|x.npz",
                   help="a sample input (.npy: the only input; .npz: input name -> array; the framework's layout) "
                        "the Caffe/TensorFlow shape-inference fallbacks run the model on, for shapes that depend on "
                        "the data (default: seeded noise)")
    g.add_argument("--validate", action="store_true",
                   help="after writing the IR, run the model in its framework (Caffe/TensorFlow worker) and the IR on "
                        "the CPU daemon on the same input and report the errors per output; exit 1 above the "
                        "tolerance")
    g.add_argument("--validate_input", metavar="x.npy|x.npz",
                   help="the input of --validate (the framework's layout; default: seeded standard normal noise); "
                        "implies --validate")
    g.add_argument("--validate_tolerance", type=float, metavar="REL",
                   help="largest accepted relative error of --validate (default 1e-4 for FP32, 1e-2 for FP16); "
                        "implies --validate")
    g.add_argument("--validate_layers", action="store_true",
                   help="compare every tensor the IR and the framework both have and name the first layer that "
                        "diverges; implies --validate")
    g.add_argument("--log_level", default="WARNING", choices=["CRITICAL", "ERROR", "WARN", "WARNING", "INFO", "DEBUG"])
    g.add_argument("--silent", action="store_true", help="print only errors")
    r = p.add_argument_group("sub-graph replacement (named as in the reference; any framework in mo-core)")
    r.add_argument("--tensorflow_use_custom_operations_config", "--transformations_config", metavar="FILE[,FILE]",
                   dest="tensorflow_use_custom_operations_config",
                   help="JSON file(s) describing sub-graphs to replace (match_kind scope, points or general)")
    r.add_argument("--tensorflow_object_detection_api_pipeline_config", metavar="pipeline.config",
                   help="the pipeline.config of a TensorFlow Object Detection API export: its values set the "
                        "support JSON's replacements; without a JSON, the one fitting the graph is chosen")
    r.add_argument("--tensorflow_custom_operations_config_update", metavar="FILE",
                   help="fill in the inputs and outputs of FILE's scope replacements for this model, then stop "
                        "(no IR is written)")
    c = p.add_argument_group("Caffe-specific parameters")
    c.add_argument("--input_proto", "-d", help="the deploy .prototxt (default: the model name with .prototxt)")
    c.add_argument("-k", dest="custom_layers_mapping", metavar="CustomLayersMapping.xml",
                   help="register Caffe layers to convert as they are (legacy mode); default: "
                        "core/front/caffe/CustomLayersMapping.xml if present")
    c.add_argument("--use-caffe-fallback", "--use_caffe_fallback", dest="use_caffe_fallback", action="store_true",
                   help="let real Caffe (in a worker process) compute the shapes of the mapped layers")
    c.add_argument("--disable_omitting_optional", action="store_true",
                   help="write every parameter of a mapped layer, also unset ones without a default")
    c.add_argument("--enable_flattening_nested_params", action="store_true",
                   help="write the fields of a mapped layer's nested parameter messages too")
    c.add_argument("--caffe_proto", metavar="caffe.proto",
                   help="the schema of the Caffe fork the model comes from (compiled at run time; its extra fields "
                        "reach extractors and CustomLayersMapping rules)")
    c.add_argument("--interp_zoom_rule", choices=["multiply", "deeplab"], default="multiply",
                   help="output size of Interp layers with zoom_factor: multiply (in * zoom, the reference's "
                        "default) or deeplab (in + (in - 1) * (zoom - 1), DeepLab-Caffe's); FAQ #96")
    t = p.add_argument_group("TensorFlow-specific parameters")
    t.add_argument("--input_model_is_text", action="store_true",
                   help="the --input_model graph is in the protobuf text format (.pbtxt)")
    t.add_argument("--disable_nhwc_to_nchw", action="store_true",
                   help="keep the model's 4-D inputs and outputs NHWC (the IR converts inside)")
    t.add_argument("--saved_model_dir", help="a SavedModel directory (frozen by the TensorFlow worker: needs "
                   "TensorFlow there, MO_CORE_TF_PYTHON chooses its python)")
    t.add_argument("--saved_model_tags", help="comma-separated tags of the SavedModel's meta graph (default: serve)")
    t.add_argument("--input_meta_graph", help="a TF1 .meta graph, frozen with its checkpoint by the TensorFlow worker")
    t.add_argument("--input_checkpoint", help="the checkpoint of --input_meta_graph (default: its path without "
                   ".meta) or of a non-frozen --input_model")
    t.add_argument("--tensorflow_subgraph_patterns", metavar="REGEX,...",
                   help="offload to TensorFlow the nodes whose names match (whole name); each pattern makes one "
                        "TFCustomSubgraphCall layer (CPU only, run by a TF worker of the daemon)")
    t.add_argument("--tensorflow_operation_patterns", metavar="REGEX,...",
                   help="offload to TensorFlow the nodes whose op types match; all matches of a pattern make one "
                        "TFCustomSubgraphCall layer")
    t.add_argument("--offload_unsupported_operations_to_tf", action="store_true",
                   help="offload every connected sub-graph of ops the converter does not support to TensorFlow")
    p.set_defaults(func=run)


def run(args) -> int:
    from cli.errors import raise_on_sigterm
    from core.pipeline import ConvertOptions, convert
    from ir import write_ir
    from ir.v11 import write_model

    raise_on_sigterm()  # a killed convert leaves no temporary files (ir/writer.py cleans up on unwinding)
    logging.basicConfig(level=getattr(logging, args.log_level.replace("WARN", "WARNING").replace(
        "WARNINGING", "WARNING")), format="[ %(levelname)s ] %(message)s")
    start = time.perf_counter()
    options = ConvertOptions(
        input_model=args.input_model, input_proto=args.input_proto, framework=args.framework,
        output_dir=args.output_dir, model_name=args.model_name, input=args.input, output=args.output,
        input_shape=args.input_shape, batch=args.batch, mean_values=args.mean_values,
        scale_values=args.scale_values, scale=args.scale, reverse_input_channels=args.reverse_input_channels,
        data_type={"float": "FP32", "half": "FP16"}.get(args.data_type, args.data_type),
        disable_fusing=args.disable_fusing, extensions=args.extensions,
        custom_layers_mapping=args.custom_layers_mapping, use_caffe_fallback=args.use_caffe_fallback,
        disable_omitting_optional=args.disable_omitting_optional,
        enable_flattening_nested_params=args.enable_flattening_nested_params,
        interp_zoom_rule=args.interp_zoom_rule, caffe_proto=args.caffe_proto, ir_version=args.ir_version,
        ov_extension_ops=args.ov_extension_ops,
        input_model_is_text=args.input_model_is_text, disable_nhwc_to_nchw=args.disable_nhwc_to_nchw,
        saved_model_dir=args.saved_model_dir, saved_model_tags=args.saved_model_tags,
        input_meta_graph=args.input_meta_graph, input_checkpoint=args.input_checkpoint,
        tensorflow_subgraph_patterns=args.tensorflow_subgraph_patterns,
        tensorflow_operation_patterns=args.tensorflow_operation_patterns,
        offload_unsupported_operations_to_tf=args.offload_unsupported_operations_to_tf,
        fallback_input=args.fallback_input, validate=args.validate, validate_input=args.validate_input,
        validate_tolerance=args.validate_tolerance, validate_layers=args.validate_layers,
        tensorflow_use_custom_operations_config=args.tensorflow_use_custom_operations_config,
        tensorflow_custom_operations_config_update=args.tensorflow_custom_operations_config_update,
        tensorflow_object_detection_api_pipeline_config=args.tensorflow_object_detection_api_pipeline_config)
    if not args.silent:
        print("Model Optimizer arguments:")
        for key in ("input_model", "input_proto", "output_dir", "model_name", "input", "output", "input_shape",
                    "batch", "mean_values", "scale_values", "scale", "reverse_input_channels", "data_type",
                    "disable_fusing", "extensions", "custom_layers_mapping", "use_caffe_fallback", "caffe_proto",
                    "ir_version", "ov_extension_ops", "input_model_is_text", "disable_nhwc_to_nchw",
                    "saved_model_dir", "saved_model_tags", "input_meta_graph", "input_checkpoint",
                    "tensorflow_use_custom_operations_config", "tensorflow_custom_operations_config_update",
                    "tensorflow_object_detection_api_pipeline_config",
                    "tensorflow_subgraph_patterns", "tensorflow_operation_patterns",
                    "offload_unsupported_operations_to_tf", "fallback_input", "validate", "validate_input",
                    "validate_tolerance", "validate_layers"):
            value = getattr(args, key)
            if value not in (None, False):
                print("\t- {:<26}{}".format(key + ":", value))
    ctx = convert(options)
    if options.odapi_support_json and not args.silent:
        print("[ INFO ] The OD API export fits the support JSON {} (chosen from its node names; "
              "--transformations_config picks one).".format(options.odapi_support_json))
    if ctx.stop_message:  # e.g. --tensorflow_custom_operations_config_update: done, no IR
        print("[ SUCCESS ] " + ctx.stop_message)
        return 0
    name = ctx.network.name
    xml_path = os.path.join(args.output_dir, name + ".xml")
    bin_path = os.path.join(args.output_dir, name + ".bin")
    if os.path.isdir(xml_path):
        raise Error("Cannot write the IR: '{}' is a directory.", xml_path, faq=21)
    if options.ir_version == 11:
        write_model(ctx.v11_model, xml_path, bin_path)
        warnings = ctx.warnings
    else:
        warnings = ctx.warnings + write_ir(ctx.network, xml_path, bin_path)
    for w in warnings:
        print("[ WARNING ]  " + w)
    if not args.silent:
        print()
        print("[ SUCCESS ] Generated IR version {} model.".format(options.ir_version))
        print("[ SUCCESS ] XML file: {}".format(os.path.abspath(xml_path)))
        print("[ SUCCESS ] BIN file: {}".format(os.path.abspath(bin_path)))
        print("[ SUCCESS ] Total execution time: {:.2f} seconds.".format(time.perf_counter() - start))
    if options.validate:
        from cli.validation import validate_written_ir
        validate_written_ir(ctx, xml_path, bin_path)
    return 0
