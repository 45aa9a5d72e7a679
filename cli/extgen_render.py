"""The files `mo-core extgen` writes, rendered from an ExtgenSpec (cli/extgen_spec.py).

The tree is the reference tool's:

    user_mo_extensions/ops/<op>.py                 the Op (attributes, shape function)
    user_mo_extensions/front/caffe/<layer>_ext.py  the Caffe extractor
    user_mo_extensions/front/tf/<layer>_ext.py     the TensorFlow extractor
    user_ie_extensions/cpu/ext_<op>.py             the CPU kernel (mo-core's Python kernel class, -l)
    user_ie_extensions/gpu/<op>.cl, <op>.xml       the GPU kernel and its description (-c)
    user_extensions/<op>.py                        --one-file: extractor(s), op and CPU kernel together

What the user must write is between `FILL IN (extgen)` and `END FILL IN` lines; the
code there raises NotImplementedError (the .cl: #error) until it is replaced, so an
unfinished extension fails loudly instead of computing something wrong.
"""
from __future__ import annotations

from cli.extgen_spec import ExtgenSpec, python_literal

FILL = "---- FILL IN (extgen): {} ----"
END = "---- END FILL IN ----"

_PY_CONVERT = {"int": "int({})", "float": "float({})", "bool": "bool({})", "string": "str({})",
               "listint": "[int(v) for v in {}]", "listfloat": "[float(v) for v in {}]"}
# an IR attribute is text: how a CPU kernel reads it back
_IR_READ = {"int": "int({})", "float": "float({})", "bool": "{} in ('1', 'true', 'True')", "string": "{}",
            "listint": "[int(v) for v in {}.split(',') if v]", "listfloat": "[float(v) for v in {}.split(',') if v]"}
_TF_KIND = {"s": "s", "i": "i", "f": "f", "b": "b", "type": "type", "shape": "shape", "list.s": "list_s",
            "list.i": "list_i", "list.f": "list_f", "list.b": "list_b", "list.type": "list_type",
            "list.shape": "list_shape"}


def file_stem(name: str) -> str:
    return name.lower()


def fill_block(indent: str, what: str, body: list[str]) -> list[str]:
    return [indent + "# " + FILL.format(what)] + [indent + line for line in body] + [indent + "# " + END]


def _not_implemented(indent: str, what: str, where: str) -> list[str]:
    return fill_block(indent, what, ["raise NotImplementedError({!r})".format(
        "extgen: fill in {} ({})".format(what, where))])


# --- the op ---------------------------------------------------------------------------
def op_class_name(spec: ExtgenSpec) -> str:
    return spec.op.name + "Op"


def render_op(spec: ExtgenSpec, where: str) -> tuple[set, list[str]]:
    """(imports, lines of the class)."""
    op = spec.op
    imports = {"from core.ops.op import Op"}
    props = ["type=__class__.op,", "op=__class__.op,"]
    for name, kind, default in op.attrs:
        if default is not None:
            props.append("{}={!r},".format(name, python_literal(kind, default)))
    if op.changes_shape:
        imports |= {"import numpy as np", "from core.graph.graph import Node"}
        props.append("infer={}.infer,".format(op_class_name(spec)))
    else:
        imports.add("from core.ops.op import copy_shape_infer")
        props.append("infer=copy_shape_infer,  # the output has the shape of input 0")
    lines = ["class {}(Op):".format(op_class_name(spec)),
             "    op = {!r}".format(op.name),
             "    enabled = True",
             "",
             "    def __init__(self, graph, attrs):",
             "        mandatory_props = dict("]
    lines += ["            " + p for p in props]
    lines += ["        )",
              "        super().__init__(graph, mandatory_props, attrs)",
              "",
              "    def supported_attrs(self):",
              "        # the attributes written to the IR (a tuple (name, lambda node: text) converts one)",
              "        return ["]
    lines += ["            {!r},".format(name) for name, _, _ in op.attrs]
    lines += ["        ]"]
    if op.changes_shape:
        lines += ["",
                  "    @staticmethod",
                  "    def infer(node: Node):",
                  "        # node.in_node(i).shape: the input shapes (np.int64 arrays); node.<attribute>: the attributes",
                  "        output_shape = list(node.in_node(0).shape)"]
        lines += _not_implemented("        ", "the output shape of {}: set output_shape".format(op.name), where)
        lines += ["        node.out_node(0).shape = np.array(output_shape, dtype=np.int64)"]
    return imports, lines


# --- extractors -------------------------------------------------------------------------
def _update_call(op_class_expr: str) -> list[str]:
    return ["        # update the attributes of the node",
            "        {}.update_node_stat(node, attrs)".format(op_class_expr),
            "        return __class__.enabled"]


def caffe_class_name(spec: ExtgenSpec) -> str:
    return spec.caffe.layer + "FrontExtractor"


def render_caffe(spec: ExtgenSpec, one_file: bool) -> tuple[set, list[str]]:
    c = spec.caffe
    imports = {"from core.front.extractor import FrontExtractorOp"}
    key = "{}.{}".format(c.module, c.layer) if c.pythonic else c.layer
    lines = ["class {}(FrontExtractorOp):".format(caffe_class_name(spec)),
             "    op = {!r}{}".format(key, "  # a Python layer: its module.layer" if c.pythonic else ""),
             "    enabled = True",
             "    framework = 'caffe'",
             "",
             "    @staticmethod",
             "    def extract(node):"]
    source = None
    if c.pythonic:
        imports.add("import ast")
        lines += ["        values = {}.parse_param_str(node.pb.python_param.param_str)".format(caffe_class_name(spec))]
        source = "values[{!r}]"
    elif c.param_field:
        lines += ["        param = node.pb.{}".format(c.param_field)]
        source = "param.{}"
    if c.all_params and c.pythonic:
        lines += ["        attrs = dict(values)  # every parameter, as it is"]
    elif c.all_params:
        imports.add("from core.front.caffe.collect_attributes import collect_attributes")
        lines += ["        attrs = collect_attributes(param)  # every parameter, as it is (IR text)"]
    else:
        lines += ["        attrs = {"]
        lines += ["            {!r}: {},".format(name, _PY_CONVERT[kind].format(source.format(fld)))
                  for fld, name, kind in c.params]
        lines += ["        }"]
    op_expr = _op_expr(spec, c.op, one_file, imports)
    lines += _update_call(op_expr)
    if c.pythonic:
        lines += ["",
                  "    @staticmethod",
                  "    def parse_param_str(param_str: str) -> dict:",
                  "        \"\"\"python_param.param_str as a dict: \"'a': 1, 'b': [2, 3]\" (literals only).\"\"\"",
                  "        param_str = param_str.strip()",
                  "        if not param_str:",
                  "            return {}",
                  "        if not (param_str.startswith('{') and param_str.endswith('}')):",
                  "            param_str = '{' + param_str + '}'",
                  "        return ast.literal_eval(param_str)"]
    return imports, lines


def _op_expr(spec: ExtgenSpec, op_name: str, one_file: bool, imports: set, op_class="", op_import="") -> str:
    if op_class:
        imports.add("from {} import {}".format(op_import, op_class))
        return op_class
    if one_file and spec.op is not None and spec.op.name == op_name:
        return op_class_name(spec)
    imports.add("from core.ops.op import Op")
    return "Op.get_op_class_by_name({!r})".format(op_name)


def tf_class_name(spec: ExtgenSpec) -> str:
    return spec.tf.layer + "FrontExtractor"


_TF_HELPERS = {
    "padding": ["def tf_padding(padding: str) -> str:",
                "    \"\"\"TensorFlow's padding as the IR's auto_pad.\"\"\"",
                "    return {'SAME': 'same_upper', 'VALID': 'valid'}.get(padding, padding.lower())"],
    "spatial": ["def tf_spatial(data_format: str) -> list:",
                "    \"\"\"The spatial axes of a tensor in this data format.\"\"\"",
                "    return [1, 2] if data_format.startswith('NH') else [2, 3]"],
    "channel": ["def tf_channel(data_format: str) -> int:",
                "    return 3 if data_format.startswith('NH') else 1"],
    "batch": ["def tf_batch(data_format: str) -> int:",
              "    return 0"],
}


def render_tf(spec: ExtgenSpec, one_file: bool, where: str) -> tuple[set, list[str], list[str]]:
    """(imports, module-level helpers, lines of the class)."""
    t = spec.tf
    imports = {"from core.front.extractor import FrontExtractorOp"}
    helpers: list[str] = []
    lines = ["class {}(FrontExtractorOp):".format(tf_class_name(spec)),
             "    op = {!r}".format(t.op),
             "    enabled = True",
             "    framework = 'tf'",
             "",
             "    @staticmethod",
             "    def extract(node):"]
    if t.all_params:
        imports.add("from core.front.tf.tensors import all_attrs")
        lines += ["        attrs = all_attrs(node)  # every attribute of the NodeDef, as it is"]
    else:
        lines += ["        attrs = {"]
        for source, name, kind in t.params:
            if not kind:
                continue
            imports.add("from core.front.tf.tensors import attr")
            if kind in _TF_KIND:
                value = "attr(node, {!r}, {!r})".format(source, _TF_KIND[kind])
            else:
                default = ", 'NHWC'" if kind != "padding" else ""
                value = "tf_{}(attr(node, {!r}, 's'{}))".format(kind, source, default)
                if _TF_HELPERS[kind][0] not in helpers:
                    helpers += _TF_HELPERS[kind] + ["", ""]
            lines.append("            {!r}: {},".format(name, value))
        lines += ["        }"]
    for source, name, kind in t.params:
        if not kind and not t.all_params:
            lines += ["        # node.pb.attr[{!r}] is the AttrValue of the TensorFlow attribute".format(source)]
            lines += _not_implemented("        ", "attribute '{}' from '{}': set attrs[{!r}]".format(
                name, source, name), where)
    op_expr = _op_expr(spec, t.op, one_file, imports, t.op_class, t.op_import)
    lines += _update_call(op_expr)
    return imports, helpers, lines


# --- the CPU kernel -----------------------------------------------------------------------
def cpu_class_name(spec: ExtgenSpec) -> str:
    return spec.cpu.name + "Kernel"


def render_cpu(spec: ExtgenSpec, where: str) -> tuple[set, list[str]]:
    k = spec.cpu
    imports = {"import numpy as np"}
    defaults = {name: default for name, _, default in (spec.op.attrs if spec.op else []) if default is not None}
    changes_shape = spec.op.changes_shape if spec.op else True
    lines = ["class {}:".format(cpu_class_name(spec)),
             "    \"\"\"Computes IR layers of type {} on mo-core's CPU daemon (OpenCV-style kernel).\"\"\"".format(
                 k.name),
             "    type = {!r}".format(k.name),
             "",
             "    def __init__(self, layer):",
             "        # layer.data: the layer's IR attributes (text); layer.blobs: its weights, if any"]
    if not k.params:
        lines += ["        self.layer = layer"]
    for name, kind in k.params:
        text = "layer.data[{!r}]".format(name) if name not in defaults else "layer.data.get({!r}, {!r})".format(
            name, defaults[name])
        lines.append("        self.{} = {}".format(name, _IR_READ[kind].format(text)))
    lines += ["",
              "    def getMemoryShapes(self, input_shapes):  # noqa: N802 (OpenCV's name)",
              "        # input_shapes: a tuple of dims per input; returns one tuple per output",
              "        shapes = [tuple(input_shapes[0])]"]
    if changes_shape:
        lines += _not_implemented("        ", "the output shapes of {}: set shapes".format(k.name), where)
    lines += ["        return shapes",
              "",
              "    def forward(self, inputs):",
              "        # inputs: float32 numpy arrays (NCHW), one per input",
              "        outputs = []  # one array per output"]
    lines += _not_implemented("        ", "the computation of {}: set outputs".format(k.name), where)
    lines += ["        return [np.asarray(o, dtype=np.float32) for o in outputs]"]
    return imports, lines


# --- the GPU kernel ---------------------------------------------------------------------
_CL_TYPES = {"int": "int", "float": "float", "listint": "int[]", "listfloat": "float[]"}


def render_gpu(spec: ExtgenSpec) -> tuple[str, str]:
    k = spec.gpu
    stem = file_stem(k.name)
    entry = stem + "_kernel"
    defaults = {name: default for name, _, default in (spec.op.attrs if spec.op else []) if default is not None}
    defines = []
    for name, kind in k.params:
        default = ' default="{}"'.format(defaults[name]) if name in defaults else ""
        defines.append('    <Define name="{}" type="{}" param="{}"{}/>'.format(name.upper(), _CL_TYPES[kind], name,
                                                                               default))
    tensors = ['    <Tensor arg-index="{0}" type="input" port-index="{0}" format="BFYX"/>'.format(i)
               for i in range(k.inputs)]
    tensors.append('    <Tensor arg-index="{}" type="output" port-index="0" format="BFYX"/>'.format(k.inputs))
    xml = "\n".join([
        '<?xml version="1.0"?>',
        "<!-- GPU custom layer {} for mo-core's GPU plugin (generated by mo-core extgen), in the".format(k.name),
        "     Inference Engine GPU plugin's format: device_daemons.gpu.custom.CustomLayers(\"{}.xml\")".format(stem),
        "     (GpuPlan custom_layers=...). Defines: the layer's attributes, upper case.",
        "     Review the work size: one work item per output element (see {}.cl). -->".format(stem),
        '<CustomLayer name="{}" type="SimpleGPU" version="1">'.format(k.name),
        '  <Kernel entry="{}">'.format(entry),
        '    <Source filename="{}.cl"/>'.format(stem),
    ] + defines + [
        "  </Kernel>",
        "  <Buffers>",
    ] + tensors + [
        "  </Buffers>",
        '  <CompilerOptions options="-cl-mad-enable"/>',
        '  <WorkSizes global="B*F*Y*X" dim="output"/>',
        "</CustomLayer>",
        "",
    ])
    args = ["const __global INPUT{0}_TYPE* input{0}".format(i) for i in range(k.inputs)]
    args.append("__global OUTPUT0_TYPE* output")
    names = ", ".join(n.upper() for n, _ in k.params) or "none"
    cl = "\n".join([
        "// GPU kernel of the {} layer (generated by mo-core extgen), described by {}.xml.".format(k.name, stem),
        "// One work item per output element, in BFYX order; <T>_DIMS and <T>_PITCHES locate elements",
        "// (INPUT0.., OUTPUT0), the layer's attributes are the defines {}.".format(names),
        "__kernel void {}({})".format(entry, ", ".join(args)),
        "{",
        "    const uint i = get_global_id(0);",
        "    const uint X = OUTPUT0_DIMS[3], Y = OUTPUT0_DIMS[2], F = OUTPUT0_DIMS[1], B = OUTPUT0_DIMS[0];",
        "    if (i >= B * F * Y * X) return;",
        "    const uint x = i % X, y = (i / X) % Y, f = (i / (X * Y)) % F, b = i / (X * Y * F);",
        "    const uint in_id = b * INPUT0_PITCHES[0] + f * INPUT0_PITCHES[1] + y * INPUT0_PITCHES[2]",
        "                       + x * INPUT0_PITCHES[3] + INPUT0_OFFSET;",
        "    const uint out_id = b * OUTPUT0_PITCHES[0] + f * OUTPUT0_PITCHES[1] + y * OUTPUT0_PITCHES[2]",
        "                        + x * OUTPUT0_PITCHES[3] + OUTPUT0_OFFSET;",
        "    // " + FILL.format("compute output[out_id] of {}".format(k.name)),
        '#error "extgen: the computation of {} is not written yet ({}.cl)"'.format(k.name, stem),
        "    output[out_id] = input0[in_id];",
        "    // " + END,
        "}",
        "",
    ])
    return xml, cl


# --- files ----------------------------------------------------------------------------------
def _module(doc: str, imports: set, body: list[str]) -> str:
    stdlib = sorted(i for i in imports if i.startswith("import ") and "numpy" not in i)
    third = sorted(i for i in imports if "numpy" in i)
    names: dict[str, list[str]] = {}
    for line in imports:
        if line.startswith("from "):
            module, _, name = line[5:].partition(" import ")
            names.setdefault(module, []).append(name)
    own = ["from {} import {}".format(m, ", ".join(sorted(set(n), key=lambda x: (x[0].islower(), x))))
           for m, n in sorted(names.items())]
    head = ['"""{}"""'.format(doc)]
    for group in (g for g in (stdlib, third, own) if g):
        head += group + [""]
    return "\n".join(head + [""] + body).rstrip("\n") + "\n"


def render(spec: ExtgenSpec) -> dict[str, str]:
    """{path relative to the output directory: text} of every file to write."""
    files: dict[str, str] = {}
    if spec.one_file:
        stem = file_stem(spec.op.name)
        path = "user_extensions/{}.py".format(stem)
        imports, body = set(), []
        helpers: list[str] = []
        parts = []
        if spec.caffe:
            i, lines = render_caffe(spec, True)
            imports |= i
            parts.append(lines)
        if spec.tf:
            i, h, lines = render_tf(spec, True, path)
            imports |= i
            helpers += h
            parts.append(lines)
        i, lines = render_op(spec, path)
        imports |= i
        parts.append(lines)
        i, lines = render_cpu(spec, path)
        imports |= i
        parts.append(lines)
        for lines in parts:
            body += lines + ["", ""]
        doc = ("The {} extension for mo-core in one file (generated by mo-core extgen): the extractor, the\n"
               "operation and its CPU kernel. Give this same file to the converter (--extensions {}) and to\n"
               "inference (-l {}, or IECore().add_extension(path, 'CPU')). Fill in the FILL IN blocks.").format(
            spec.op.name, path.split("/")[-1], path.split("/")[-1])
        files[path] = _module(doc, imports, helpers + body)
    else:
        if spec.op or spec.caffe or spec.tf:
            for package in ("user_mo_extensions", "user_mo_extensions/front", "user_mo_extensions/front/caffe",
                            "user_mo_extensions/front/tf", "user_mo_extensions/ops"):
                files[package + "/__init__.py"] = ""
        if spec.op:
            path = "user_mo_extensions/ops/{}.py".format(file_stem(spec.op.name))
            imports, lines = render_op(spec, path)
            files[path] = _module("The {} operation (generated by mo-core extgen): its attributes and output shapes."
                                  .format(spec.op.name), imports, lines)
        if spec.caffe:
            path = "user_mo_extensions/front/caffe/{}_ext.py".format(file_stem(spec.caffe.layer))
            imports, lines = render_caffe(spec, False)
            files[path] = _module("Extractor of Caffe {} layers (generated by mo-core extgen).".format(
                spec.caffe.layer), imports, lines)
        if spec.tf:
            path = "user_mo_extensions/front/tf/{}_ext.py".format(file_stem(spec.tf.layer))
            imports, helpers, lines = render_tf(spec, False, path)
            files[path] = _module("Extractor of TensorFlow {} ops (generated by mo-core extgen).".format(spec.tf.op),
                                  imports, helpers + lines)
        if spec.cpu:
            path = "user_ie_extensions/cpu/ext_{}.py".format(file_stem(spec.cpu.name))
            imports, lines = render_cpu(spec, path)
            files[path] = _module("CPU kernel of {} layers for mo-core's CPU daemon (generated by mo-core extgen):\n"
                                  "`mo-core infer -l {}` or IECore().add_extension(path, 'CPU').".format(
                                      spec.cpu.name, path.split("/")[-1]), imports, lines)
    if spec.gpu:
        xml, cl = render_gpu(spec)
        stem = file_stem(spec.gpu.name)
        files["user_ie_extensions/gpu/{}.xml".format(stem)] = xml
        files["user_ie_extensions/gpu/{}.cl".format(stem)] = cl
    return files


def fill_ins(files: dict[str, str]) -> list[tuple[str, int, str]]:
    """(path, line number, what) of every FILL IN block."""
    result = []
    for path, text in sorted(files.items()):
        for number, line in enumerate(text.splitlines(), 1):
            if "FILL IN (extgen):" in line:
                result.append((path, number, line.split("FILL IN (extgen):", 1)[1].strip(" -")))
    return result
