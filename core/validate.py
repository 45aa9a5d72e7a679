"""`mo-core convert --validate`: the written IR against the model's own framework.

The framework runs in its worker (the Caffe worker's forward_net, the TF worker's
load_subgraph/run_subgraph on the GraphDef the converter read), the IR on the CPU
daemon (a runner the CLI gives: the core does not import the daemons' client),
both on the same input: --validate_input (.npy for the only input, .npz by input
name; the framework's layout) or seeded standard normal noise. Preprocessing the
IR holds (--mean_values, --scale_values, --scale, --reverse_input_channels) is
applied to the framework's input, so both compute the same thing. Per output:
the largest absolute error and the relative one (largest absolute error over the
largest absolute reference value); above --validate_tolerance (default 1e-4,
1e-2 for FP16) the validation fails.

--validate_layers compares every tensor the IR and the framework both have and
names the first IR layer (in the IR's order) whose output diverges, with the
layers between it and the last tensors that agreed; such a divergence fails the
validation even when the outputs hide it (a saturated softmax). Which IR tensor is which
framework tensor is recorded while converting (record_framework_tensors, right
after the TensorFlow lowering: every TF tensor is then a data node of its name;
for Caffe, a layer's top as the layer left it: the Caffe worker takes it before
an in-place layer overwrites the blob),
and kept only for tensors whose producing layer the optimizations left as it was
(check_framework_tensors, before the precision pass): a convolution the
optimizer fused a bias or a batch norm into computes another tensor than the
framework's convolution, and is not compared.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

import numpy as np

from core.errors import Error

log = logging.getLogger("mo_core")

TENSOR = "fw_tensor"       # data node attribute: (framework tensor name, stored NCHW for an NHWC framework tensor)
_SIGNATURE = "fw_signature"
TO_NCHW = (0, 3, 1, 2)
SEED = 0


def default_tolerance(data_type: str) -> float:
    return 1e-2 if data_type == "FP16" else 1e-4


# --------------------------------------------------------------------------- conversion side
def _signature(op) -> str:
    """What an op computes: its type and attributes, and its blobs' bytes."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr((op.soft_get("type"), op.soft_get("op"))).encode())
    for key in sorted(op.attrs):
        value = op.attrs[key]
        if key in ("name", "shape", "infer", "backend_attrs", "op_class", "pb", "tf_class", _SIGNATURE) or callable(
                value):
            continue
        if isinstance(value, (bool, int, float, str, tuple, list)) or value is None:
            digest.update(repr((key, value)).encode()[:4096])
        elif isinstance(value, np.ndarray) and value.size <= 4096:
            digest.update(key.encode() + np.ascontiguousarray(value).tobytes())
    for name, data, _ in sorted(op.blob_inputs(), key=lambda b: b[0]):
        value = np.ascontiguousarray(data.soft_get("value"))
        digest.update(name.encode() + str(value.dtype).encode() + value.tobytes())
    return digest.hexdigest()


def record_framework_tensors(graph, framework: str, known_names=None):
    """Marks each data node that holds a framework tensor (see the module doc); the
    model's outputs are kept apart too (graph.graph["fw_outputs"]: [(tensor, nchw, IR
    shape)]): an optimization may fuse the layer making one, but it stays an output."""
    outputs = []
    for op in graph.topological_ops():
        for port, data in op.out_nodes().items():
            if data.soft_get("value") is not None:
                continue
            if framework == "tf":
                if "tf_shape" not in data.attrs:
                    continue
                name = str(data.soft_get("name"))
                node_name, _, out_port = name.rpartition(":") if ":" in name else (name, "", "0")
                if known_names is not None and node_name not in known_names:
                    continue
                data[TENSOR] = ("{}:{}".format(node_name, out_port or 0), bool(data.soft_get("nchw")))
                data[_SIGNATURE] = (op.id, _signature(op))
            elif op.has_valid("pb") and op.soft_get("op") != "Parameter":  # Caffe: layer L's top p is "L:p"
                data[TENSOR] = ("{}:{}".format(op.pb.name, port), False)
                data[_SIGNATURE] = (op.id, _signature(op))
    for op in graph.topological_ops():
        for data in op.out_nodes().values():
            if TENSOR in data.attrs and graph.out_degree(data.id) == 0:
                outputs.append(data[TENSOR] + ([int(d) for d in data.shape],))
    graph.graph["fw_outputs"] = outputs


def forget_framework_tensor(data) -> None:
    """A pass changed what this tensor holds: --validate does not compare it."""
    data.attrs.pop(TENSOR, None)
    data.attrs.pop(_SIGNATURE, None)


def check_framework_tensors(graph):
    """Forgets the tensors whose producer an optimization changed since recording."""
    for data in graph.data_nodes():
        recorded = data.soft_get(_SIGNATURE)
        if recorded is None:
            continue
        producer = data.producer()
        if producer is None or (producer.id, _signature(producer)) != recorded:
            forget_framework_tensor(data)
        data.attrs.pop(_SIGNATURE, None)


@dataclass
class Pair:
    key: str               # the daemon's output name ("layer" or "layer.port")
    layer: str
    layer_type: str
    tensor: str            # the framework's tensor (TF "node:port") or blob (Caffe)
    nchw: bool             # the IR holds it NCHW, the framework NHWC
    output: bool           # a network output


@dataclass
class Plan:
    """What to compare, made from the converted graph (before it is dropped)."""
    framework: str
    inputs: list = field(default_factory=list)   # [(IR input name, framework input name, nchw, IR dims)]
    pairs: list = field(default_factory=list)    # [Pair] in the IR's order
    producers: dict = field(default_factory=dict)  # layer -> [input layers]
    graph_def: bytes | None = None               # TensorFlow: the GraphDef the converter read
    mean: dict = field(default_factory=dict)     # --mean_values / --scale_values by IR input name (None: the
    scale: dict = field(default_factory=dict)    # only input), as the converter resolved them
    prototxt: str | None = None                  # Caffe: the deploy prototxt and the weights
    weights: str | None = None


def _input_tensor(ctx, param) -> str:
    """The framework tensor an IR input feeds."""
    if ctx.options.framework != "tf":
        from core.front.caffe.fallback import _input_blob_name
        return _input_blob_name(param)
    for spec in ctx.new_inputs:
        if param.name not in (spec.input_names or []):
            continue
        if param.name == spec.name:  # the node itself (an input, or a node fed by constants only)
            return spec.name + ":0"
        if param.name.startswith(spec.name + "/output_port_"):
            return "{}:{}".format(spec.name, param.name.rsplit("_", 1)[1])
        node = spec.node
        port = int(param.name.rsplit("_", 1)[1])
        from core.front.tf.tf_subgraph import tensor_key
        texts = [t for t in node.pb.input if not t.startswith("^")]
        name, out = tensor_key(texts[port])
        return "{}:{}".format(name, out)
    return param.name + ":0"


def plan_validation(ctx) -> Plan:
    """The comparisons for the converted network (call after emit, on ctx.graph)."""
    o = ctx.options
    graph = ctx.graph
    plan = Plan(o.framework, mean=ctx.preprocess[0], scale=ctx.preprocess[1])
    if o.framework != "tf":
        if o.input:
            raise Error("--validate runs the Caffe model from its own inputs: it cannot check a model cut with "
                        "--input (TensorFlow models can).")
        with open(o.input_proto) as f:
            plan.prototxt = f.read()
        import os
        plan.weights = os.path.abspath(o.input_model)
    producer_layer = {}
    unmatched = []   # IR outputs without a framework tensor of their own: (key, op, data)
    for op in graph.topological_ops():
        if op.soft_get("op") == "Parameter":
            dims = [int(d) for d in op.out_node(0).shape]
            nchw = o.framework == "tf" and len(dims) == 4 and not o.disable_nhwc_to_nchw
            plan.inputs.append((op.name, _input_tensor(ctx, op), nchw, dims))
        n_in = len(op.in_edges_data())
        outs = sorted(op.out_nodes().items())
        plan.producers[op.name] = sorted({producer_layer[u] for u, a in op.in_edges_data() if "bin" not in a
                                          and u in producer_layer})
        for port, data in outs:
            producer_layer[data.id] = op.name
            if op.soft_get("op") == "Parameter":
                continue
            ident = data.soft_get(TENSOR)
            key = op.name if len(outs) == 1 else "{}.{}".format(op.name, n_in + port)
            output = graph.out_degree(data.id) == 0
            if ident is None:
                if output:
                    unmatched.append((key, op, data))
                continue
            plan.pairs.append(Pair(key, op.name, str(op.soft_get("type")), ident[0], ident[1], output))
    _pair_outputs(graph, plan, unmatched)
    if o.framework == "tf":
        plan.graph_def = _placeholders_at_ir_shapes(graph.graph["tf_graph_def"], plan.inputs)
    return plan


def _placeholders_at_ir_shapes(graph_def, inputs: list) -> bytes:
    """The GraphDef (serialized) with the shape of each Placeholder the IR feeds set to
    the IR input's (in TensorFlow's layout): -b / --input_shape changed it, and TensorFlow
    refuses a feed of another shape than its placeholder's. (A graph that bakes its batch
    into constants then fails in TensorFlow, which says where.)"""
    shapes = {tensor: [dims[i] for i in (0, 2, 3, 1)] if nchw else dims for _, tensor, nchw, dims in inputs}
    def as_fed(node) -> bool:  # (reads the attribute map without adding to it)
        shape = node.attr["shape"].shape if "shape" in node.attr else None
        return shape is not None and not shape.unknown_rank and [d.size for d in shape.dim] == shapes[node.name + ":0"]
    if all(as_fed(n) for n in graph_def.node if n.op == "Placeholder" and n.name + ":0" in shapes):
        return graph_def.SerializeToString()
    graph = type(graph_def)()
    graph.CopyFrom(graph_def)  # (the converter's own graph stays as it was read)
    for node in graph.node:
        if node.op == "Placeholder" and node.name + ":0" in shapes:
            shape = node.attr["shape"].shape
            shape.Clear()
            for d in shapes[node.name + ":0"]:
                shape.dim.add(size=d)
    return graph.SerializeToString()


def _pair_outputs(graph, plan: Plan, unmatched: list):
    """IR outputs whose layer an optimization changed get the model output of their shape
    that no other IR output holds (in the model's order)."""
    taken = {p.tensor for p in plan.pairs if p.output}
    free = [o for o in graph.graph.get("fw_outputs", []) if o[0] not in taken]
    left = []
    for key, op, data in unmatched:
        shape = [int(d) for d in data.shape]
        match = next((o for o in free if o[2] == shape), None)
        if match is None:
            left.append(op.name)
            continue
        free.remove(match)
        plan.pairs.append(Pair(key, op.name, str(op.soft_get("type")), match[0], match[1], True))
    if left:
        log.warning("--validate: the framework has no tensor for the IR output(s) %s; they are not compared.",
                    ", ".join(sorted(left)))


# --------------------------------------------------------------------------- running
def inputs_for(plan: Plan, o) -> tuple[dict, dict, str]:
    """({IR input: array}, {framework input: array}, where they came from)."""
    names = [name for name, _, _, _ in plan.inputs]
    fw_shapes = {name: (np.array(dims)[[0, 2, 3, 1]].tolist() if nchw else dims)
                 for name, _, nchw, dims in plan.inputs}
    if o.validate_input:
        from core.front.sample_input import load_sample_inputs
        given = load_sample_inputs(o.validate_input, "--validate_input", names)
        missing = sorted(set(names) - set(given))
        if missing:
            raise Error("--validate_input '{}' has no array for the input(s) {}.", o.validate_input, ", ".join(missing))
        source = o.validate_input
    else:
        rng = np.random.default_rng(SEED)
        given = {name: rng.standard_normal(fw_shapes[name]).astype(np.float32) for name in names}
        source = "seeded standard normal noise (seed {})".format(SEED)
    ir_in, fw_in = {}, {}
    for name, tensor, nchw, dims in plan.inputs:
        x = np.asarray(given[name], dtype=np.float32)
        if list(x.shape) != list(fw_shapes[name]):
            raise Error("--validate_input: the array for input '{}' has the shape {}, the IR's input takes {} (in the "
                        "framework's layout).", name, list(x.shape), fw_shapes[name])
        ir_in[name] = np.ascontiguousarray(x.transpose(TO_NCHW)) if nchw else x
        fw_in[tensor] = _preprocessed(x, name, plan, o, plan.mean, plan.scale, len(names))
    return ir_in, fw_in, source


def _preprocessed(x, name, plan, o, mean, scale, n_inputs):
    """What the model sees for the IR's raw input x: (reverse(x) - mean) / scale, channels
    on the framework's channel axis."""
    axis = -1 if plan.framework == "tf" and x.ndim == 4 else min(1, x.ndim - 1)
    channels = x.shape[axis] if x.ndim else 1
    if o.reverse_input_channels and channels == 3:
        x = np.flip(x, axis=axis)
    shape = [1] * x.ndim
    if x.ndim:
        shape[axis] = -1

    def pick(values):
        return values.get(name, values.get(None) if n_inputs == 1 else None)
    m, s = pick(mean), pick(scale)
    if s is None and o.scale is not None:
        s = np.array([o.scale], np.float32)
    if m is not None:
        x = x - np.asarray(m, np.float32).reshape(shape if np.size(m) > 1 else [1] * x.ndim)
    if s is not None:
        x = x / np.asarray(s, np.float32).reshape(shape if np.size(s) > 1 else [1] * x.ndim)
    return np.array(x, dtype=np.float32, order="C")  # (ascontiguousarray would make a scalar 1-D)


def run_framework(plan: Plan, fw_inputs: dict, tensors: list[str]) -> dict:
    """{tensor: array} the framework computes on the inputs."""
    if plan.framework == "tf":
        from core.front.tf import worker
        from core.services import tf_worker as contract
        inputs = list(fw_inputs)
        graph_id = contract.subgraph_id(plan.graph_def, inputs, tensors)
        args, arrays = contract.load_subgraph_request(graph_id, plan.graph_def, inputs, tensors)
        worker.call(contract.LOAD_SUBGRAPH, args, arrays, "loading the model for --validate")
        _, outputs = worker.call(contract.RUN_SUBGRAPH, *contract.run_subgraph_request(
            graph_id, [fw_inputs[name] for name in inputs]), "running the model for --validate")
        return dict(zip(tensors, outputs))
    return _run_caffe(plan, fw_inputs, tensors)


def _run_caffe(plan: Plan, fw_inputs: dict, tensors: list[str]) -> dict:
    from core.microkernel import MicrokernelError, ProtocolError, RemoteError, WorkerProcess
    from core.services import caffe_worker as contract
    worker = WorkerProcess(contract.WORKER_MODULE, name="caffe", startup_timeout=120, request_timeout=600,
                           restart_budget=0, args=contract.worker_args([], "any"), env={"GLOG_minloglevel": "2"},
                           sandbox=contract.sandbox(plan.weights))
    try:
        outputs = [(t.rpartition(":")[0], int(t.rpartition(":")[2])) for t in tensors]
        result, arrays = worker.call(contract.FORWARD_NET, contract.forward_net_request(
            plan.prototxt, plan.weights, list(fw_inputs), outputs), list(fw_inputs.values()), timeout=600)
        return dict(zip(tensors, contract.check_forward_net_result(result, arrays, outputs)))
    except RemoteError as exc:
        raise Error("--validate: Caffe could not run the model: {}", exc.message, faq=exc.faq or 13) from None
    except (ProtocolError, MicrokernelError) as exc:
        raise Error("--validate: the Caffe worker failed running the model: {}", exc) from None
    finally:
        worker.stop()


@dataclass
class Row:
    pair: Pair
    abs_err: float
    rel_err: float
    problem: str | None = None


def compare(plan: Plan, ours: dict, theirs: dict) -> list[Row]:
    rows = []
    for pair in plan.pairs:
        if pair.key not in ours or pair.tensor not in theirs:
            continue
        a = np.asarray(ours[pair.key], np.float64)
        b = np.asarray(theirs[pair.tensor], np.float64)
        if pair.nchw and b.ndim == 4:
            b = b.transpose(TO_NCHW)
        if a.shape != b.shape:
            if a.size == b.size:  # a layout the IR flattens differently: compare as TensorFlow orders it
                b = b.reshape(a.shape)
            else:
                rows.append(Row(pair, float("inf"), float("inf"), "shape {} vs the framework's {}".format(
                    list(a.shape), list(b.shape))))
                continue
        diff = float(np.abs(a - b).max()) if a.size else 0.0
        scale = float(np.abs(b).max()) if b.size else 0.0
        rel = diff / scale if scale > 0 else diff
        if not np.isfinite(a).all() and np.isfinite(b).all():
            rows.append(Row(pair, float("inf"), float("inf"), "the IR computes inf/nan where the framework does not"))
            continue
        rows.append(Row(pair, diff, rel))
    return rows


@dataclass
class Report:
    lines: list
    failed: list                # rows above the tolerance: outputs, and with --validate_layers the first divergence
    first_divergence: Row | None
    tolerance: float


def validate(ctx, plan: Plan, run_ir, tolerance: float | None = None) -> Report:
    """Runs both and compares. run_ir(ir_inputs, extra_layers) -> {output name: array}."""
    o = ctx.options
    tol = tolerance if tolerance is not None else default_tolerance(o.data_type)
    ir_in, fw_in, source = inputs_for(plan, o)
    layers = sorted({p.layer for p in plan.pairs if not p.output}) if o.validate_layers else []
    ours = run_ir(ir_in, layers)
    wanted = [p for p in plan.pairs if p.output or o.validate_layers]
    tensors = list(dict.fromkeys(p.tensor for p in wanted))
    theirs = run_framework(plan, fw_in, tensors)
    rows = compare(Plan(plan.framework, pairs=wanted), ours, theirs)
    framework = "TensorFlow" if plan.framework == "tf" else "Caffe"
    lines = ["Validation: the IR on the CPU daemon vs {} on {} (tolerance {:g} relative)".format(
        framework, source, tol)]
    failed = []
    for row in rows:
        if not row.pair.output:
            continue
        ok = row.problem is None and row.rel_err <= tol
        lines.append("  output {!r} vs {} {!r}: max abs error {:.3g}, relative {:.3g}  {}".format(
            row.pair.key, framework, row.pair.tensor, row.abs_err, row.rel_err,
            "OK" if ok else "ABOVE TOLERANCE" if row.problem is None else row.problem))
        if not ok:
            failed.append(row)
    first = None
    if o.validate_layers:
        inner = [r for r in rows if not r.pair.output]
        lines.append("  {} intermediate tensors compared (the others: layers the optimizer fused or made)".format(
            len(inner)))
        first = next((r for r in rows if r.problem is not None or r.rel_err > tol), None)
        if first is not None:
            agreed = {r.pair.layer for r in rows if r.problem is None and r.rel_err <= tol}
            suspects = _suspects(plan, first.pair.layer, agreed)
            lines.append("  first divergence: layer {!r} ({}) vs {} {!r}: max abs error {:.3g}, relative {:.3g}"
                         "{}".format(first.pair.layer, first.pair.layer_type, framework, first.pair.tensor,
                                     first.abs_err, first.rel_err, "" if first.problem is None else
                                     " (" + first.problem + ")"))
            lines.append("  computed from the last agreeing tensors by: {}".format(", ".join(suspects)))
            if first not in failed:  # (an output may hide it: a saturated softmax, an argmax)
                failed.append(first)
        else:
            lines.append("  no layer diverges")
    return Report(lines, failed, first, tol)


def _suspects(plan: Plan, layer: str, agreed: set) -> list[str]:
    """The layers between the agreeing tensors and `layer` (itself included)."""
    inputs = {name for name, _, _, _ in plan.inputs}
    seen, stack, order = set(), [layer], []
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        order.append(name)
        stack.extend(p for p in plan.producers.get(name, []) if p not in agreed and p not in inputs)
    return order
