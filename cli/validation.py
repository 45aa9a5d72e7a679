"""`mo-core convert --validate`: runs core/validate.py with the IR on the CPU daemon
(IECore: a daemon of the runtime directory, started if none runs) and prints the
report; a failed validation is an [ ERROR ] (exit 1). The IR files stay: they are
what was validated."""
from __future__ import annotations

from core.errors import Error


def plan_checked(ctx):
    """The comparisons to make (core.validate.Plan), and the inputs they will use checked
    (--validate_input's arrays: there, of the right names and shapes): before the IR is
    written, so that a mistake there leaves no files."""
    from core.validate import inputs_for, plan_validation
    plan = plan_validation(ctx)
    inputs_for(plan, ctx.options)
    return plan


def _add_extension_kernels(ie, extensions: str | None) -> None:
    """The CPU kernels of the --extensions given as files: a one-file extension holds
    the extractor, the op and the op's CPU kernel (the file -l takes), so the IR it
    made validates as it will run. A file without a kernel class is left out."""
    import os

    from core.front.cli_values import split_names
    from device_daemons.client import InferenceError
    for path in split_names(extensions):
        if not (os.path.isfile(path) and path.endswith(".py")):
            continue
        try:
            ie.add_extension(path, "CPU")
        except InferenceError as exc:
            if "defines no kernel class" not in str(exc):
                raise Error("--validate: the CPU kernels of the extension {} cannot be loaded: {}", path,
                            exc) from None


def validate_written_ir(ctx, plan, xml_path: str, bin_path: str) -> None:
    from core.validate import validate

    def run_ir(inputs: dict, layers: list) -> dict:
        from device_daemons.client import IECore
        ie = IECore(policy="auto")
        _add_extension_kernels(ie, ctx.options.extensions)
        net = ie.read_network(model=xml_path, weights=bin_path)
        if layers:
            net.add_outputs(layers)
        # the IR's arithmetic against the framework's: f32 (the CPU's default may be bf16)
        exec_net = ie.load_network(net, "CPU", config={"INFERENCE_PRECISION_HINT": "f32"})
        try:
            return exec_net.infer(inputs)
        finally:
            exec_net.close()

    report = validate(ctx, plan, run_ir, ctx.options.validate_tolerance)
    for line in report.lines:
        print("[ VALIDATION ] " + line)
    if report.failed:
        worst = max(report.failed, key=lambda r: r.rel_err)
        where = ""
        if report.first_divergence is not None:
            where = " The first layer that diverges is '{}' ({}).".format(report.first_divergence.pair.layer,
                                                                       report.first_divergence.pair.layer_type)
        elif not ctx.options.validate_layers:
            where = " --validate_layers names the first layer that diverges."
        what = "output" if worst.pair.output else "tensor"
        raise Error("Validation failed: the IR differs from the framework by more than the tolerance {:g} ({} "
                    "'{}': relative error {:.3g}).{} The IR was written: {}", report.tolerance, what, worst.pair.key,
                    worst.rel_err, where, xml_path)
