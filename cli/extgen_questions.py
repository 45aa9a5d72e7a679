"""The interactive mode of `mo-core extgen new`: the reference tool's questions, per
component, whose answers become the configuration dictionary of the silent mode
(cli/extgen_spec.py), so both modes generate the same files from the same answers.

An answer in [brackets] is the default (Enter takes it). A parameter list is typed
one parameter a line and ended with `q`; when an earlier component asked for the
same kind of list, the tool offers to reuse it.
"""
from __future__ import annotations

from cli.extgen_spec import IDENT, MODULE, GPU_TYPES, TF_TYPES, TYPES, python_literal
from core.errors import Error


class Asker:
    """Asks on stdout, reads stdin; invalid answers are asked again."""

    def __init__(self, read=input, write=print):
        self.read = read
        self.write = write

    def line(self, prompt: str, default: str | None = None) -> str:
        shown = "{} [{}]: ".format(prompt.rstrip(":"), default) if default else "{} ".format(prompt)
        try:
            answer = self.read(shown).strip()
        except EOFError:
            raise Error("extgen: the input ended before every question was answered (at: {}).", prompt) from None
        return answer if answer or default is None else default

    def yes(self, prompt: str) -> bool:
        while True:
            answer = self.line(prompt + " (y/n)").lower()
            if answer in ("y", "yes", "n", "no"):
                return answer.startswith("y")
            self.write("Please answer y or n.")

    def name(self, prompt: str, default: str | None = None, pattern=IDENT, allow_empty=False) -> str:
        while True:
            answer = self.line(prompt, default)
            if (allow_empty and not answer) or pattern.match(answer):
                return answer
            self.write("'{}' is not a valid name: letters, digits and underscores, not starting with a digit."
                       .format(answer))

    def rows(self, intro: list[str], columns: int, types, type_column: int, optional_type=False,
             default_column: bool = False) -> list[list[str]]:
        for text in intro:
            self.write(text)
        rows = []
        while True:
            answer = self.line("")
            if answer == "q":
                return rows
            parts = answer.split()
            wanted = (columns - 1, columns) if optional_type else (columns, columns + 1) if default_column \
                else (columns,)
            problem = None
            if len(parts) not in wanted:
                problem = "expected {} values".format(" or ".join(map(str, wanted)))
            elif not all(IDENT.match(p) for p in parts[:type_column]):
                problem = "names are letters, digits and underscores"
            else:
                kind = parts[type_column] if len(parts) > type_column else ""
                if kind not in types and not (optional_type and kind == ""):
                    problem = "the type must be one of {}".format(", ".join(types))
                elif default_column and len(parts) > columns:
                    try:
                        python_literal(kind, parts[columns])
                    except ValueError as exc:
                        problem = str(exc)
            if problem:
                self.write("'{}': {}. Enter it again (or q to finish).".format(answer, problem))
                continue
            rows.append(parts)


def _reuse(ask: Asker, earlier, describe) -> bool:
    return bool(earlier) and ask.yes("Do you want to use the same parameters as above ({})?".format(describe(earlier)))


def ask_config(components: dict, output_dir: str | None, one_file: bool, ask: Asker) -> dict:
    """The configuration dictionary from the answers to the questions of the components that are on."""
    config = {key: value for key, value in components.items() if value}
    if one_file:
        config["one_file"] = True
    if output_dir:
        config["output_dir"] = output_dir
    kernel_params = None   # [[name, type]] of the op attributes or the CPU kernel, offered again later
    op_default = None
    if components.get("mo_caffe_ext"):
        ask.write("\n-- Model Optimizer Caffe extractor --")
        caffe = {"pythonic": ask.yes("Is your layer Pythonic?")}
        if caffe["pythonic"]:
            caffe["module"] = ask.name("Please enter module name:", pattern=MODULE)
            caffe["layer"] = ask.name("Please enter layer name:")
        else:
            caffe["module"] = ""
            caffe["layer"] = ask.name("Please enter layer name:")
            caffe["param_field"] = ask.name("Please enter the name of the layer's parameter field in the prototxt "
                                            "(e.g. proposal_param; empty if it has none):", allow_empty=True)
        caffe["all_params"] = False
        caffe["params"] = []
        if caffe["pythonic"] or caffe.get("param_field"):
            caffe["all_params"] = ask.yes("Do you want automatically parse all parameters from the {} (parameters "
                                          "will be parsed as is, without any renaming or omitting)?".format(
                                              "param_str" if caffe["pythonic"] else caffe["param_field"]))
            if not caffe["all_params"]:
                caffe["params"] = ask.rows(
                    ["Please enter all parameters in format", "<param1> <new name1> <type1>",
                     "<param2> <new name2> <type2>", "etc", "where type is one of: " + ", ".join(TYPES),
                     "When you finish please enter 'q'"], 3, TYPES, 2)
        caffe["op"] = ask.name("Please enter operation name to use with this extractor:", caffe["layer"])
        config["caffe"] = caffe
        op_default = caffe["op"]
        kernel_params = [[name, kind] for _, name, kind in caffe["params"]] or None
    if components.get("mo_tf_ext"):
        ask.write("\n-- Model Optimizer TensorFlow extractor --")
        tf = {"layer": ask.name("Please enter layer name:")}
        tf["all_params"] = ask.yes("Do you want automatically parse all parameters from proto file (parameters "
                                   "will be parsed as is, without any renaming or omitting)")
        tf["params"] = [] if tf["all_params"] else ask.rows(
            ["Please enter all parameters in format", "<param1> <new name1> <type1>",
             "<param2> <new name2> <type2>", "etc",
             "where type is one of the following types:",
             "s - String, i - Int, f - Float, b - Bool, type - DataType, shape - TensorShapeProto,",
             "padding - Padding type, spatial - Get spatial from dataFormat, channel - Get channel from dataFormat,",
             "batch - Get batch from dataFormat, list.s - List of strings, list.i - List of ints, list.f - List of "
             "floats,", "list.b - list of bools, list.type - list of DataType, list.shape - list of TensorShapeProto,",
             "if your attribute type is not in list or you want implement your own attribute parsing just omit "
             "<type>", "When you finish please enter 'q'"], 3, TF_TYPES, 2, optional_type=True)
        tf["params"] = [p + [""] * (3 - len(p)) for p in tf["params"]]
        tf["op"] = ask.name("Please enter operation name to use with this extractor:", op_default)
        tf["op_class"] = ask.name("Please enter class with operation to use with this extractor (empty: the "
                                  "operation registered as {}):".format(tf["op"]), allow_empty=True)
        tf["op_import"] = ask.name("Please enter import path to class with operation:", pattern=MODULE) \
            if tf["op_class"] else ""
        config["tf"] = tf
        op_default = op_default or tf["op"]
    if components.get("mo_op"):
        ask.write("\n-- Model Optimizer operation --")
        op = {"name": ask.name("Please enter operation name:", op_default)}
        op["changes_shape"] = ask.yes("Does your operation change shape?")
        if _reuse(ask, kernel_params, _describe):
            op["attrs"] = [list(p) for p in kernel_params]
        else:
            op["attrs"] = ask.rows(
                ["Please enter all attributes of the operation (written to the IR) in format",
                 "<name1> <type1> [<default1>]", "<name2> <type2> [<default2>]", "etc",
                 "where type is one of: " + ", ".join(TYPES) + " (a list default: 1,2,3)",
                 "When you finish please enter 'q'"], 2, TYPES, 1, default_column=True)
        config["op"] = op
        op_default = op["name"]
        kernel_params = [p[:2] for p in op["attrs"]] or kernel_params
    if components.get("ie_cpu_ext"):
        ask.write("\n-- Inference Engine CPU extension --")
        cpu = {"name": ask.name("Please enter operation name:", op_default)}
        cpu["params"] = [list(p) for p in kernel_params] if _reuse(ask, kernel_params, _describe) else ask.rows(
            ["Please enter all parameters in format", "<param1> <type>", "<param2> <type>", "etc",
             "Supported cpu types: " + ", ".join(TYPES), "When you finish please enter 'q'"], 2, TYPES, 1)
        config["cpu"] = cpu
        op_default = cpu["name"]
        kernel_params = cpu["params"] or kernel_params
    if components.get("ie_gpu_ext"):
        ask.write("\n-- Inference Engine GPU extension --")
        gpu = {"name": ask.name("Please enter operation name:", op_default)}
        usable = [p for p in kernel_params or [] if p[1] in GPU_TYPES] if kernel_params else None
        gpu["params"] = [list(p) for p in usable] if usable and _reuse(ask, usable, _describe) else ask.rows(
            ["Please enter all parameters in format", "<param1> <type>", "<param2> <type>", "etc",
             "Supported gpu types: " + ", ".join(GPU_TYPES), "When you finish please enter 'q'"], 2, GPU_TYPES, 1)
        while True:
            inputs = ask.line("Please enter the number of inputs of the layer:", "1")
            if inputs.isdigit() and 1 <= int(inputs) <= 8:
                gpu["inputs"] = int(inputs)
                break
            ask.write("Please enter a number from 1 to 8.")
        config["gpu"] = gpu
    return config


def _describe(params) -> str:
    return ", ".join(" ".join(p[:2]) for p in params)
