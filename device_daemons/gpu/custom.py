"""GPU custom layers: OpenCL kernels described by an .xml file in the format the
Inference Engine's GPU plugin used (`-c FILE`, `ie.add_extension(FILE, "GPU")`):

    <CustomLayer name="ReLU" type="SimpleGPU" version="1">
      <Kernel entry="example_relu_kernel">
        <Source filename="custom_layer_kernel.cl"/>             (1+, concatenated in order)
        <Define name="neg_slope" type="float" param="negative_slope" default="0.0"/>
      </Kernel>
      <Buffers>
        <Tensor arg-index="0" type="input" port-index="0" format="BFYX"/>
        <Tensor arg-index="1" type="output" port-index="0" format="BFYX"/>
        <Data arg-index="2" name="weights"/>                    (a blob of the IR layer)
      </Buffers>
      <CompilerOptions options="-cl-mad-enable"/>
      <WorkSizes global="X,Y,B*F" local="" dim="output"/>
    </CustomLayer>

A file holds one or more CustomLayer elements (a root element around them is
optional). `name` is the IR layer type. Source paths are relative to the .xml and
must stay in its directory (no absolute path, no `..` out of it); the .xml and its
sources must be regular files of at most MAX_FILE_BYTES (a FIFO would block the
daemon for every client, /dev/zero never ends).

Defines: `#define name value`, the value being the layer's attribute `param`
(else `default`); type int / float values must be numbers, int[] / float[] a
comma-separated list, which becomes `(type []){ v0, v1, }`. A Define without a
param is emitted as `#define name` (the name may carry a value: "FOO 3").

Built-in defines, for every bound tensor <T> = INPUT<port> / OUTPUT<port>:
<T>_DIMS (BFYX order, rank < 4 padded with 1s) and <T>_DIMS_SIZE, <T>_TYPE,
<T>_FORMAT_<format>, <T>_LOWER_PADDING / <T>_UPPER_PADDING (zeros), their
_SIZE, <T>_PITCHES (elements between neighbours of each BFYX dim in the
tensor's format) and <T>_PITCHES_SIZE, <T>_OFFSET (0); NUM_INPUTS,
GLOBAL_WORKSIZE(_SIZE), LOCAL_WORKSIZE(_SIZE).

Work sizes: up to 3 integer expressions in B, F, Y, X of the `dim` tensor
("output" = output 0, or "input N"), with + - * / % and parentheses; default
global "B*F*Y*X", no local size (the driver chooses).

Custom kernels always see float tensors: in a plan that stores half, inputs are
converted to float before the kernel and outputs back after it (a device without
cl_khr_fp16 cannot read half in user code), and a format other than BFYX is a
device-side transposition before and after. Output shapes are the IR's port
dims, with the batch following input 0's. Build errors show the OpenCL build log
and name the .xml and .cl files.
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

import numpy as np
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from ir import IRError

from ..cpu.kernels import KernelError
from .kernels.base import GpuKernel, i32, round_up
from .kernels.shape_ops import contiguous_strides, merge_dims
from .programs import BuildError, build

MAX_FILE_BYTES = 16 << 20
MAX_WORK_SIZE = 1 << 63
FORMATS = {"BFYX": "bfyx", "BYXF": "byxf", "YXFB": "yxfb", "FYXB": "fyxb"}
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fF]?$")
_INTEGER = re.compile(r"^[+-]?\d+$")
_DEFINE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\s+\S.*)?$")


class CustomLayerError(IRError):
    """A GPU custom layer file that cannot be used (what, where, what to do)."""

    kind = "kernel"  # the daemons' error kind


@dataclass
class Define:
    name: str
    param: str | None
    type: str | None
    default: str | None


@dataclass
class TensorArg:
    arg: int
    kind: str      # "input" / "output"
    port: int      # index among the layer's inputs / outputs
    format: str    # BFYX, BYXF, YXFB, FYXB


@dataclass
class CustomLayerDef:
    type: str
    xml_path: str
    entry: str
    sources: list = field(default_factory=list)     # [(path, text)]
    defines: list = field(default_factory=list)
    tensors: list = field(default_factory=list)
    data: dict = field(default_factory=dict)        # arg index -> blob name
    options: str = ""
    global_sizes: list = field(default_factory=lambda: ["B*F*Y*X"])
    local_sizes: list | None = None
    dim: tuple = ("output", 0)

    @property
    def where(self) -> str:
        return f"GPU custom layer {self.type!r} ({self.xml_path})"


# --- work size expressions -------------------------------------------------------------
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Add, ast.Sub, ast.Mult,
            ast.Div, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd)


def parse_size(text: str, where: str):
    """An integer expression in B, F, Y, X, checked (never eval'd)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise CustomLayerError(f"{where}: work size {text!r} is not an expression of B, F, Y, X with + - * / %") \
            from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED) or (isinstance(node, ast.Name) and node.id not in "BFYX") or \
                (isinstance(node, ast.Constant) and (not isinstance(node.value, int) or isinstance(node.value, bool))):
            raise CustomLayerError(f"{where}: work size {text!r} may only use integers, B, F, Y, X, parentheses "
                                   "and + - * / %")
    return tree


def eval_size(tree, dims: dict, text: str, where: str) -> int:
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return dims[node.id]
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        a, b = ev(node.left), ev(node.right)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if b == 0:
            raise CustomLayerError(f"{where}: work size {text!r} divides by zero for B,F,Y,X = "
                                   f"{dims['B']},{dims['F']},{dims['Y']},{dims['X']}")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C's truncating division
        return q if isinstance(node.op, (ast.Div, ast.FloorDiv)) else a - q * b
    return int(ev(tree))


def work_size(text: str, dims: dict, where: str) -> int:
    """A <WorkSizes> entry's value for these dims: 1 to 2^63 - 1 (what size_t holds on
    every device we run; larger or negative values are this file's error)."""
    value = eval_size(parse_size(text, where), dims, text, where)
    if not 0 < value < MAX_WORK_SIZE:
        raise CustomLayerError(f"{where}: work size {text!r} is {value} for B,F,Y,X = {dims['B']},{dims['F']},"
                               f"{dims['Y']},{dims['X']}; an OpenCL work size is 1 to 2^63 - 1")
    return value


# --- the .xml file -------------------------------------------------------------------------
def _read(path: str, what: str, where: str) -> str:
    """A regular file's text, at most MAX_FILE_BYTES: opened without blocking (a FIFO
    would wait for a writer), checked on the descriptor it was opened as."""
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CustomLayerError(f"{where}: cannot find the {what} {path}; check the path") from None
    except OSError as exc:
        raise CustomLayerError(f"{where}: cannot read the {what} {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CustomLayerError(f"{where}: the {what} {path} is not a regular file (a FIFO, a device or a "
                                   f"directory); give a file")
        if st.st_size > MAX_FILE_BYTES:
            raise CustomLayerError(f"{where}: the {what} {path} has {st.st_size} bytes, more than the "
                                   f"{MAX_FILE_BYTES >> 20} MB a GPU custom layer file may have")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise CustomLayerError(f"{where}: the {what} {path} grew past {MAX_FILE_BYTES >> 20} MB while read")
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CustomLayerError(f"{where}: the {what} {path} is not UTF-8 text") from None
    except OSError as exc:
        raise CustomLayerError(f"{where}: cannot read the {what} {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def _source_path(base: str, filename: str, where: str) -> str:
    """A <Source filename>: relative to the .xml's directory and inside it (symbolic
    links resolved), so an .xml cannot compile files from elsewhere."""
    if os.path.isabs(filename):
        raise CustomLayerError(f"{where}: <Source filename={filename!r}> is an absolute path; give a path relative "
                               f"to the .xml's directory {base}")
    path = os.path.join(base, filename)
    real, root = os.path.realpath(path), os.path.realpath(base)
    if os.path.commonpath([real, root]) != root:
        raise CustomLayerError(f"{where}: <Source filename={filename!r}> is outside the .xml's directory {base}; "
                               f"put the OpenCL source next to the .xml")
    return path


def _int_attr(element, name, where, required=True, default=None):
    text = element.get(name)
    if text is None:
        if required:
            raise CustomLayerError(f"{where}: <{element.tag}> has no {name!r} attribute")
        return default
    if not _INTEGER.match(text.strip()) or int(text) < 0:
        raise CustomLayerError(f"{where}: <{element.tag}> {name}={text!r} is not a non-negative integer")
    return int(text)


def _parse_layer(node, xml_path: str) -> CustomLayerDef:
    name = (node.get("name") or "").strip()
    where = f"GPU custom layer {name!r} ({xml_path})" if name else f"a CustomLayer of {xml_path}"
    if not name:
        raise CustomLayerError(f"{where}: <CustomLayer> needs a name attribute (the IR layer type)")
    if node.get("type") != "SimpleGPU":
        raise CustomLayerError(f"{where}: type={node.get('type')!r}; the GPU plugin runs type=\"SimpleGPU\" only")
    if node.get("version") != "1":
        raise CustomLayerError(f"{where}: version={node.get('version')!r}; only version=\"1\" is known")
    kernels = node.findall("Kernel")
    if len(kernels) != 1:
        raise CustomLayerError(f"{where}: needs exactly one <Kernel>, found {len(kernels)}")
    kernel = kernels[0]
    entry = (kernel.get("entry") or "").strip()
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", entry):
        raise CustomLayerError(f"{where}: <Kernel entry={entry!r}> must name the OpenCL kernel function")
    spec = CustomLayerDef(name, xml_path, entry)
    base = os.path.dirname(os.path.abspath(xml_path))
    for source in kernel.findall("Source"):
        filename = source.get("filename")
        if not filename:
            raise CustomLayerError(f"{where}: <Source> has no filename attribute")
        path = _source_path(base, filename, where)
        spec.sources.append((path, _read(path, "OpenCL source", where)))
    if not spec.sources:
        raise CustomLayerError(f"{where}: <Kernel> needs at least one <Source filename=\"...\"/>")
    for d in kernel.findall("Define"):
        dname = (d.get("name") or "").strip()
        if not _DEFINE_NAME.match(dname):
            raise CustomLayerError(f"{where}: <Define name={dname!r}> is not a macro name")
        dtype = d.get("type")
        if dtype is not None and dtype not in ("int", "float", "int[]", "float[]"):
            raise CustomLayerError(f"{where}: <Define name={dname!r}> type={dtype!r}; use int, float, int[] or "
                                   "float[]")
        spec.defines.append(Define(dname, d.get("param"), dtype, d.get("default")))
    buffers = node.findall("Buffers")
    if len(buffers) != 1:
        raise CustomLayerError(f"{where}: needs exactly one <Buffers>, found {len(buffers)}")
    args = set()
    for t in buffers[0].findall("Tensor"):
        arg = _int_attr(t, "arg-index", where)
        kind = t.get("type")
        if kind not in ("input", "output"):
            raise CustomLayerError(f"{where}: <Tensor arg-index=\"{arg}\"> type={kind!r}; use input or output")
        fmt = (t.get("format") or "BFYX").upper()
        if fmt not in FORMATS:
            raise CustomLayerError(f"{where}: <Tensor arg-index=\"{arg}\"> format={t.get('format')!r}; use "
                                   f"{', '.join(FORMATS)}")
        spec.tensors.append(TensorArg(arg, kind, _int_attr(t, "port-index", where), fmt))
        args.add(arg)
    for d in buffers[0].findall("Data"):
        arg = _int_attr(d, "arg-index", where)
        if not d.get("name"):
            raise CustomLayerError(f"{where}: <Data arg-index=\"{arg}\"> needs the name of a blob of the layer")
        spec.data[arg] = d.get("name")
        args.add(arg)
    if not any(t.kind == "output" for t in spec.tensors):
        raise CustomLayerError(f"{where}: <Buffers> binds no output <Tensor>")
    n_args = len(spec.tensors) + len(spec.data)
    if args != set(range(n_args)):
        raise CustomLayerError(f"{where}: the arg-index values {sorted(args)} must be 0..{n_args - 1}, each once "
                               "(every argument of the OpenCL kernel is bound)")
    spec.options = " ".join((c.get("options") or "").strip() for c in node.findall("CompilerOptions")).strip()
    sizes = node.findall("WorkSizes")
    if len(sizes) > 1:
        raise CustomLayerError(f"{where}: has {len(sizes)} <WorkSizes>; give at most one")
    if sizes:
        ws = sizes[0]
        if ws.get("global", "").strip():
            spec.global_sizes = [s for s in ws.get("global").split(",")]
        if ws.get("local", "").strip():
            spec.local_sizes = [s for s in ws.get("local").split(",")]
        dim = (ws.get("dim") or "output").strip().lower()
        m = re.match(r"^(output|input)\s*(\d*)$", dim)
        if not m:
            raise CustomLayerError(f"{where}: <WorkSizes dim={ws.get('dim')!r}>; use \"output\" or \"input N\"")
        spec.dim = (m.group(1), int(m.group(2) or 0))
    for sizes_list in [spec.global_sizes] + ([spec.local_sizes] if spec.local_sizes else []):
        if not 1 <= len(sizes_list) <= 3:
            raise CustomLayerError(f"{where}: work sizes {','.join(sizes_list)!r} must have 1 to 3 entries")
        for text in sizes_list:
            parse_size(text, where)
    if spec.local_sizes and len(spec.local_sizes) != len(spec.global_sizes):
        raise CustomLayerError(f"{where}: local work sizes {spec.local_sizes} and global {spec.global_sizes} "
                               "have different lengths")
    return spec


def load_custom_layers(xml_path) -> dict[str, CustomLayerDef]:
    """{IR type: CustomLayerDef} of one .xml file (its .cl sources read)."""
    xml_path = os.fspath(xml_path)
    where = f"GPU custom layer file {xml_path}"
    text = _read(xml_path, "GPU custom layer file", where)
    text = re.sub(r"^\s*<\?xml[^>]*\?>", "", text)  # so that a root can wrap several CustomLayer elements
    try:
        root = fromstring(f"<mo_core_custom_layers>{text}</mo_core_custom_layers>")
    except DefusedXmlException as exc:
        raise CustomLayerError(f"{where}: forbidden XML construct ({type(exc).__name__})") from None
    except Exception as exc:  # ParseError
        raise CustomLayerError(f"{where}: not well-formed XML ({exc}); the wrapper adds 1 to line numbers") from None
    nodes = root.findall("CustomLayer") + root.findall("*/CustomLayer")
    if not nodes:
        raise CustomLayerError(f"{where}: has no <CustomLayer> element")
    found: dict[str, CustomLayerDef] = {}
    for node in nodes:
        spec = _parse_layer(node, xml_path)
        found[spec.type] = spec
    return found


class CustomLayers:
    """The GPU custom layers known to a plan or a daemon: {IR type: CustomLayerDef}."""

    def __init__(self, *paths):
        self.defs: dict[str, CustomLayerDef] = {}
        self.files: list[str] = []
        for path in paths:
            self.add_file(path)

    def add_file(self, path) -> list[str]:
        defs = load_custom_layers(path)
        self.defs.update(defs)
        self.files.append(os.fspath(path))
        return sorted(defs)

    def __contains__(self, layer_type) -> bool:
        return layer_type in self.defs

    def __bool__(self) -> bool:
        return bool(self.defs)

    def kernel(self, layer, ctx) -> "CustomKernel":
        return CustomKernel(layer, ctx, self.defs[layer.type])


# --- the kernel ------------------------------------------------------------------------------
_FORMAT_ORDER = {"BFYX": (0, 1, 2, 3), "BYXF": (0, 2, 3, 1), "YXFB": (2, 3, 1, 0), "FYXB": (1, 2, 3, 0)}


def bfyx(shape, where) -> tuple:
    shape = tuple(int(d) for d in shape)
    if len(shape) > 4:
        raise CustomLayerError(f"{where}: a {len(shape)}-D tensor {list(shape)} has no BFYX form (up to 4-D)")
    return shape + (1,) * (4 - len(shape))


def pitches(dims, fmt) -> list[int]:
    """Elements between neighbours along B, F, Y, X in memory of format `fmt`."""
    order = _FORMAT_ORDER[fmt]                     # memory order of BFYX axes, outermost first
    strides = contiguous_strides([dims[a] for a in order])
    result = [0] * 4
    for position, axis in enumerate(order):
        result[axis] = strides[position]
    return result


def _array(ctype, values) -> str:
    return f"({ctype} []){{ {', '.join(str(v) for v in values)}, }}"


class CustomKernel(GpuKernel):
    """A layer computed by a user's OpenCL kernel (see the module doc)."""

    def __init__(self, layer, ctx, spec: CustomLayerDef):
        self.layer = layer
        self.ctx = ctx
        self.spec = spec
        self.ref = None
        self.act = (0, 0.0, 0.0)
        where = f"{spec.where}, layer {layer.name!r}"
        self.where = where
        for t in spec.tensors:
            ports = layer.inputs if t.kind == "input" else layer.outputs
            if t.port >= len(ports):
                raise KernelError(layer, f"{spec.where} binds {t.kind} port-index {t.port}, but the layer has "
                                         f"{len(ports)} {t.kind}(s)")
        self.blobs = {}
        for arg, name in spec.data.items():
            if name not in layer.blobs:
                raise KernelError(layer, f"{spec.where} binds the blob {name!r} (arg-index {arg}), which the layer "
                                         f"does not have (it has {', '.join(sorted(layer.blobs)) or 'none'})")
            self.blobs[arg] = ctx.upload(np.asarray(layer.blobs[name], np.float32).ravel(), np.float32)
        self.values = {d.name: self._define_value(d) for d in spec.defines}

    def _define_value(self, d: Define) -> str:
        if d.param is None:
            return ""
        value = self.layer.data.get(d.param, d.default)
        if value is None:
            raise KernelError(self.layer, f"{self.spec.where}: <Define name={d.name!r}> takes the layer attribute "
                                          f"{d.param!r}, which the layer does not have, and has no default")
        value = str(value).strip()
        if d.type in ("int[]", "float[]"):
            items = [v.strip() for v in value.split(",") if v.strip()]
            check = _INTEGER if d.type == "int[]" else _NUMBER
            if not items or not all(check.match(v) for v in items):
                raise KernelError(self.layer, f"{self.spec.where}: attribute {d.param!r}={value!r} is not a list of "
                                              f"{d.type[:-2]} values (<Define name={d.name!r}>)")
            return _array(d.type[:-2], items)
        check = _INTEGER if d.type == "int" else _NUMBER if d.type == "float" else re.compile(r"^[\w.+-]+$")
        if not check.match(value):
            raise KernelError(self.layer, f"{self.spec.where}: attribute {d.param!r}={value!r} is not "
                                          f"{'an ' + d.type if d.type else 'a plain'} value (<Define name={d.name!r}>)")
        return value

    # shapes: the IR's output dims; the batch follows input 0
    def shapes(self, in_shapes):
        outs = [tuple(p.dims) for p in self.layer.outputs]
        if in_shapes and self.layer.inputs:
            ir_batch, batch = self.layer.inputs[0].dims[0] if self.layer.inputs[0].dims else None, in_shapes[0][0]
            outs = [(batch,) + o[1:] if o and ir_batch is not None and o[0] == ir_batch else o for o in outs]
        return outs

    def configure(self, in_shapes, out_shapes):
        super().configure(in_shapes, out_shapes)
        spec = self.spec
        self.tensor_dims = {}
        for t in spec.tensors:
            shapes = in_shapes if t.kind == "input" else out_shapes
            self.tensor_dims[(t.kind, t.port)] = bfyx(shapes[t.port], self.where)
        kind, index = spec.dim
        dims_source = in_shapes if kind == "input" else out_shapes
        if index >= len(dims_source):
            raise KernelError(self.layer, f"{spec.where}: <WorkSizes dim=\"{kind} {index}\"> names a tensor the layer "
                                          "does not have")
        b, f, y, x = bfyx(dims_source[index], self.where)
        env = {"B": b, "F": f, "Y": y, "X": x}
        self.global_size = [work_size(s, env, self.where) for s in spec.global_sizes]
        self.local_size = None if not spec.local_sizes else \
            [work_size(s, env, self.where) for s in spec.local_sizes]
        if any(g <= 0 for g in self.global_size) or (self.local_size and any(v <= 0 for v in self.local_size)):
            raise KernelError(self.layer, f"{spec.where}: work sizes global {self.global_size} local "
                                          f"{self.local_size} must be positive (B,F,Y,X = {b},{f},{y},{x})")
        if self.local_size and any(g % v for g, v in zip(self.global_size, self.local_size)):
            raise KernelError(self.layer, f"{spec.where}: local work size {self.local_size} does not divide the "
                                          f"global work size {self.global_size}")
        self.program_obj = self._build()

    def _source(self) -> str:
        spec = self.spec
        lines = ["// generated by mo-core for " + spec.where]
        lines.append(f"#define NUM_INPUTS {len(self.layer.inputs)}")
        lines.append(f"#define GLOBAL_WORKSIZE {_array('size_t', self.global_size)}")
        lines.append(f"#define GLOBAL_WORKSIZE_SIZE {len(self.global_size)}")
        local = self.local_size or []
        if local:
            lines.append(f"#define LOCAL_WORKSIZE {_array('size_t', local)}")
        lines.append(f"#define LOCAL_WORKSIZE_SIZE {len(local)}")
        for t in spec.tensors:
            name = f"{'INPUT' if t.kind == 'input' else 'OUTPUT'}{t.port}"
            dims = self.tensor_dims[(t.kind, t.port)]
            lines += [f"#define {name}_DIMS {_array('int', dims)}", f"#define {name}_DIMS_SIZE 4",
                      f"#define {name}_TYPE float", f"#define {name}_FORMAT_{t.format}",
                      f"#define {name}_LOWER_PADDING {_array('int', [0] * 4)}", f"#define {name}_LOWER_PADDING_SIZE 4",
                      f"#define {name}_UPPER_PADDING {_array('int', [0] * 4)}", f"#define {name}_UPPER_PADDING_SIZE 4",
                      f"#define {name}_PITCHES {_array('int', pitches(dims, t.format))}",
                      f"#define {name}_PITCHES_SIZE 4", f"#define {name}_OFFSET 0"]
        for d in spec.defines:
            value = self.values[d.name]
            lines.append(f"#define {d.name} {value}".rstrip())
        for path, text in spec.sources:
            lines.append(f'#line 1 "{os.path.basename(path)}"')
            lines.append(text)
        return "\n".join(lines) + "\n"

    def _build(self):
        spec = self.spec
        options = tuple(spec.options.split()) if spec.options else ()
        try:
            program = build(self.ctx.device, self._source(), options, spec.where)
        except BuildError as exc:
            files = ", ".join(p for p, _ in spec.sources)
            raise BuildError(f"{spec.where}, layer {self.layer.name!r}: the OpenCL source ({files}) does not compile "
                             f"on {self.ctx.device.full_name} (options: {spec.options or 'none'}). Fix the kernel; "
                             f"the build log follows.\n{exc.message.split('Build log:', 1)[-1].strip()}") from None
        import pyopencl as cl
        try:
            cl.Kernel(program, spec.entry)
        except cl.Error:
            names = [k.function_name for k in program.all_kernels()]
            raise BuildError(f"{spec.where}: the entry {spec.entry!r} is not a kernel of "
                             f"{', '.join(p for p, _ in spec.sources)} (kernels: {', '.join(names) or 'none'})") \
                from None
        return program

    # conversions between the plan's tensors and the float, formatted ones the user's kernel sees
    def _stages(self, t):
        """The conversions a tensor needs: ["float"] (half -> float) and/or ["format"]."""
        stages = []
        if self.ctx.half:
            stages.append("float")
        if t.format != "BFYX":
            stages.append("format")
        return stages

    def scratch_bytes(self):
        sizes = []
        for t in self.spec.tensors:
            count = int(np.prod(self.tensor_dims[(t.kind, t.port)]))
            sizes += [count * 4] * len(self._stages(t))
        return sizes

    def _permute(self, src, dst, dims, fmt, to_format: bool):
        """A float copy between BFYX and `fmt` (shape_ops.cl compiled for float)."""
        order = _FORMAT_ORDER[fmt]
        shape_mem = [dims[a] for a in order]
        bfyx_strides = contiguous_strides(dims)
        if to_format:   # iterate in the format's memory order: contiguous destination
            shape, s_strides, d_strides = shape_mem, [bfyx_strides[a] for a in order], contiguous_strides(shape_mem)
        else:           # iterate in BFYX order: contiguous destination
            shape, s_strides, d_strides = list(dims), pitches(dims, fmt), bfyx_strides
        merged = merge_dims(shape, s_strides, d_strides)
        desc = np.ones(18, np.int32)
        for k, (n, s, d) in enumerate(merged):
            desc[k], desc[6 + k], desc[12 + k] = n, s, d
        count = int(np.prod(dims))
        program = self.ctx.program("shape_ops.cl", half=False)
        return self._launch(program, "copy_nd", [src, dst, self.ctx.upload_ints(desc)] +
                            i32(len(merged), count, 0, 0), (round_up(count, 64),))

    def _launch(self, program, name, args, global_size, local_size=None):
        from .kernels.base import Launch
        return Launch(program, name, tuple(args), tuple(global_size), local_size)

    def launches(self, ins, outs, scratch=()):
        spec = self.spec
        scratch = list(scratch)
        convert = self.ctx.program("shape_ops.cl")
        before, after, bound = [], [], {}
        for t in spec.tensors:
            dims = self.tensor_dims[(t.kind, t.port)]
            count = int(np.prod(dims))
            stages = self._stages(t)
            buf = ins[t.port] if t.kind == "input" else outs[t.port]
            mine = [scratch.pop(0) for _ in stages]
            if t.kind == "input":
                src = buf
                for stage, dst in zip(stages, mine):
                    if stage == "float":
                        before.append(self._launch(convert, "to_float", [src, dst] + i32(count), (round_up(count, 64),)))
                    else:
                        before.append(self._permute(src, dst, dims, t.format, to_format=True))
                    src = dst
                bound[t.arg] = src
            else:
                # the user writes the last buffer of the chain; conversions run backwards into `buf`
                targets = [buf] + mine[:-1] if mine else [buf]
                bound[t.arg] = mine[-1] if mine else buf
                chain = []
                for stage, src, dst in zip(reversed(stages), reversed(mine), reversed(targets)):
                    if stage == "float":
                        chain.append(self._launch(convert, "from_float", [src, dst] + i32(count),
                                                  (round_up(count, 64),)))
                    else:
                        chain.append(self._permute(src, dst, dims, t.format, to_format=False))
                after += chain
        for arg, buffer in self.blobs.items():
            bound[arg] = buffer
        args = [bound[i] for i in range(len(bound))]
        main = self._launch(self.program_obj, spec.entry, args, tuple(self.global_size),
                            tuple(self.local_size) if self.local_size else None)
        return before + [main] + after
