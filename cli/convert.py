"""`mo-core convert`: the Model Optimizer's options (Caffe and TensorFlow front ends)."""
import logging
import os
import time

import argparse

from core.convert_options import GENERAL, SWITCH, ConvertOptions, add_arguments, summary_lines
from core.errors import Error

# mo's options that mo-core does not have, each with what to do instead (argparse alone said "unrecognized")
MO_ONLY = {
    "--layout": "mo-core's IR takes 4-D inputs NCHW (TensorFlow's NHWC is permuted); keep NHWC with "
                "--disable_nhwc_to_nchw",
    "--source_layout": "see --layout",
    "--target_layout": "see --layout",
    "--progress": "conversion takes seconds; --log_level DEBUG prints each pass with its time",
    "--stream_output": "see --progress",
    "--transform": "mo-core has no optional transformations (LowLatency2 and the like)",
    "--use_new_frontend": "mo-core has one front end per framework",
    "--use_legacy_frontend": "mo-core has one front end per framework",
}


class _MoOnly(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        parser.error("{} is an option of OpenVINO's mo that mo-core does not have: {}.".format(
            option_string, MO_ONLY[option_string]))


def add_parser(sub):
    p = sub.add_parser("convert", help="convert a Caffe or TensorFlow model into IR (.xml + .bin), version 2 or 11",
                       description="Convert a trained Caffe or TensorFlow model into an optimized Intermediate "
                                   "Representation.", allow_abbrev=True)  # (as the reference's argparse: --input_mod)
    g = add_arguments(p)[GENERAL]
    g.add_argument("--log_level", default="WARNING", choices=["CRITICAL", "ERROR", "WARN", "WARNING", "INFO", "DEBUG"])
    g.add_argument("--silent", help="print only errors", **SWITCH)
    g.add_argument("--static_shape", help="accepted for mo's command lines: mo-core's IRs always have static shapes",
                   **SWITCH)
    g.add_argument("--version", action="version", version="mo-core 0.1.0")
    for flag in MO_ONLY:
        g.add_argument(flag, nargs="?", action=_MoOnly, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args) -> int:
    from cli.errors import raise_on_sigterm
    from core.pipeline import convert
    from ir import write_ir
    from ir.v11 import write_model

    raise_on_sigterm()  # a killed convert leaves no temporary files (ir/writer.py cleans up on unwinding)
    logging.basicConfig(level=getattr(logging, args.log_level.replace("WARN", "WARNING").replace(
        "WARNINGING", "WARNING")), format="[ %(levelname)s ] %(message)s")
    start = time.perf_counter()
    options = ConvertOptions.from_args(args)
    if not args.silent:
        print("Model Optimizer arguments:")
        print("\n".join(summary_lines(options)))
    ctx = convert(options)
    if ctx.support_json and not args.silent:
        print("[ INFO ] The OD API export fits the support JSON {} (chosen from its node names; "
              "--transformations_config picks one).".format(ctx.support_json))
    if ctx.stop_message:  # e.g. --tensorflow_custom_operations_config_update: done, no IR
        print("[ SUCCESS ] " + ctx.stop_message)
        return 0
    plan = None
    if options.validate:  # (what it needs - its inputs, a model it can run - checked before anything is written)
        from cli.validation import plan_checked
        plan = plan_checked(ctx)
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
    if plan is not None:
        from cli.validation import validate_written_ir
        validate_written_ir(ctx, plan, xml_path, bin_path)
    return 0
