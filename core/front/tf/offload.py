"""Offloading sub-graphs to TensorFlow: the reference guide's three options, each
producing TFCustomSubgraphCall layers that TensorFlow runs at inference (the CPU
daemon calls a TF worker: device_daemons/cpu/tf_backed.py).

  --tensorflow_subgraph_patterns "block_3/.*,head/.*"   regexes on node names; the
      nodes of each pattern make one node of their own (patterns never merge; a
      node both match goes to the first)
  --tensorflow_operation_patterns "Cumsum,Erf.*"        regexes on op types; all
      matches of one pattern merge into one node
  --offload_unsupported_operations_to_tf                each connected sub-graph of
      ops the converter has no extractor for becomes one node

A regular expression matches the whole name (fullmatch), in RE2's syntax and with
RE2's guarantee (google-re2): time linear in the name's length whatever the
pattern - Python's backtracking `re` took minutes on `(a+)+$` against a long node
name. (RE2 has no backreferences or lookaround: such a pattern is an error that
says so.) Where a path leaves
the nodes to merge and comes back (A -> outside -> C), one node cannot hold them
(TensorFlow would need the outside result in the middle of the call): they are
split into the fewest nodes that can be merged (offload_groups.py), with a
warning. Model inputs (Placeholders) are never offloaded.

`merge_nodes` makes the node: it holds the TFSubgraph (the NodeDefs as the model
has them, the outside tensors read, the tensors given to the rest); constant
producers it reads (weights: no Placeholder among their ancestors) go inside it,
as the reference recommends, so a convolution offloaded with its weights sees
them in TensorFlow's layout. Its shapes come from TensorFlow (fallback.py). At
lowering it becomes an IR TFCustomSubgraphCall layer (core/ops/tf_subgraph.py)
whose GraphDef is self-contained: Placeholders for the IR inputs (NCHW, a
Transpose to NHWC inside for 4-D tensors, a Cast where TensorFlow wants another
type), constants the converter computed as Consts, a Cast to float and a
Transpose to NCHW after 4-D outputs.
"""
from __future__ import annotations

import logging
import os

import networkx as nx
import numpy as np

from core.errors import Error
from core.front.tf.offload_groups import acyclic_groups, connected_groups, outside_path, topological_units, \
    with_whole_loops
from core.front.tf.ops.base import TFOp
from core.front.tf.tf_subgraph import TF_DTYPES, DT_FLOAT, GraphDefBuilder, TFSubgraph, node_source, \
    tensor_dtype, tensor_ref

log = logging.getLogger("mo_core")
OP = "TFCustomSubgraphCall"


class TFSubgraphCall(TFOp):
    """A node that stands for a TensorFlow sub-graph (made by merge_nodes, never by a NodeDef)."""
    tf_types = ()

    @classmethod
    def infer(cls, node):
        from core.front.tf.fallback import shape_fallback
        shape_fallback(node.graph).infer(node)

    @staticmethod
    def lower(node, lw):
        lower_subgraph_call(node, lw)


# --------------------------------------------------------------------------- options
def parse_patterns(text: str | None, option: str) -> list:
    """The comma-separated patterns, compiled by RE2 (see the module doc)."""
    import re2
    options = re2.Options()
    options.log_errors = False
    patterns = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            patterns.append(re2.compile(item, options))
        except re2.error as exc:
            why = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else exc
            raise Error("{}: '{}' is not a regular expression RE2 accepts ({}); patterns match in linear time, "
                        "without backreferences or lookaround.", option, item, why) from None
    if text is not None and not patterns:
        raise Error("{} is empty: give comma-separated regular expressions.", option)
    return patterns


def _candidates(graph) -> list:
    """Op nodes that can be offloaded: the model's own nodes, not its inputs."""
    ops = [graph.node_obj(n) for unit in topological_units(graph) for n in unit]  # (loops allowed)
    return [n for n in ops if n.soft_get("op") != "Parameter" and n.has_valid("pb")
            and n.soft_get("tf_subgraph") is None and n.soft_get("tf_op") not in ("NoOp",)]


def offload_by_patterns(graph, subgraph_patterns: str | None, operation_patterns: str | None) -> list:
    """--tensorflow_subgraph_patterns then --tensorflow_operation_patterns; the new nodes."""
    made = []
    for option, text, key in (("--tensorflow_subgraph_patterns", subgraph_patterns, "name"),
                              ("--tensorflow_operation_patterns", operation_patterns, "tf_op")):
        for pattern in parse_patterns(text, option):
            ids = [n.id for n in _candidates(graph) if pattern.fullmatch(str(n.soft_get(key)))]
            if not ids:
                log.warning("%s: '%s' matches no node of the model.", option, pattern.pattern)
                continue
            made += _merge_in_groups(graph, ids, "{} '{}'".format(option, pattern.pattern))
    return made


def offload_unsupported(graph, nodes) -> list:
    """--offload_unsupported_operations_to_tf: each connected sub-graph of `nodes`."""
    made = []
    ids = with_whole_loops(graph, [n.id for n in nodes])
    for component in sorted(connected_groups(graph, ids), key=lambda c: min(ids.index(i) for i in c)):
        made += _merge_in_groups(graph, component, "the unsupported operations")
    return made


def _merge_in_groups(graph, ids, why: str) -> list:
    ids = with_whole_loops(graph, ids)
    groups = acyclic_groups(graph, ids)
    if len(groups) > 1:
        path = outside_path(graph, set(ids))
        detail = " (e.g. '{}' -> '{}' -> '{}')".format(*(graph.nodes[i]["name"] for i in path)) if path else ""
        log.warning("The nodes of %s cannot be one TFCustomSubgraphCall: a path leaves them and comes back%s. "
                    "They make %d calls instead.", why, detail, len(groups))
    return [merge_nodes(graph, group) for group in groups]


# --------------------------------------------------------------------------- merging
def _constant_producer(graph, node, members) -> list | None:
    """The op ids (topological order) that compute `node`'s outputs from constants only
    - no Placeholder, every one with its NodeDef -, or None."""
    if node.id in members:
        return None
    ops = [a for a in nx.ancestors(graph, node.id) if graph.nodes[a].get("kind") == "op"] + [node.id]
    for op_id in ops:
        attrs = graph.nodes[op_id]
        if attrs.get("op") == "Parameter" or attrs.get("pb") is None or attrs.get("tf_subgraph") is not None or \
                op_id in members:
            return None
    return [n for n in nx.topological_sort(graph.subgraph(ops)) if graph.nodes[n].get("kind") == "op"]


def _group_name(graph, members, outputs) -> str:
    if len(outputs) == 1:
        return graph.nodes[outputs[0][0]]["name"]
    names = [graph.nodes[m]["name"] for m in members]
    scope = os.path.commonprefix(names)
    scope = scope[:scope.rfind("/") + 1] if "/" in scope else ""
    return "{}{}".format(scope or names[0] + "/", OP)


def merge_nodes(graph, ids, name: str | None = None):
    """One node for the op nodes `ids` (an acyclic group); returns it. Their outside
    inputs become its input ports, the tensors others read (or model outputs) its
    output ports, in topological order."""
    # (the members and the tensors between them: ordering them must not walk the whole graph per merge)
    between = {d for m in ids for d in graph.successors(m)}
    members = [n for unit in topological_units(graph.subgraph(set(ids) | between)) for n in unit]
    member_set = set(members)
    sources = {m: node_source(graph.node_obj(m)) for m in members}
    missing = [graph.nodes[m]["name"] for m, s in sources.items() if s is None]
    if missing:
        raise Error("Node '{}' has no TensorFlow definition, so TensorFlow cannot compute it.", missing[0])
    inside_constants: list = []
    inputs: list = []        # (data node, key, dtype)
    seen = set()
    for m in members:
        node = graph.node_obj(m)
        for port, data in sorted(node.in_nodes().items()):
            if data.id in seen:
                continue
            seen.add(data.id)
            producer = data.producer()
            if producer is not None and producer.id in member_set:
                continue
            constant = _constant_producer(graph, producer, member_set) if producer is not None else None
            if constant is not None:
                inside_constants += [c for c in constant if c not in inside_constants]
                continue
            key = sources[m].inputs[port]
            dtype = tensor_dtype(data)
            inputs.append((data, key, dtype))
    outputs: list = []       # (member, port, data node)
    for m in members:
        for port, data in sorted(graph.node_obj(m).out_nodes().items()):
            readers = [c.id for c in data.consumers()]
            if data.soft_get("is_output") or any(r not in member_set for r in readers):
                outputs.append((m, port, data))
    if not outputs:
        raise Error("The nodes to offload ({}) compute nothing the model uses.", ", ".join(
            graph.nodes[m]["name"] for m in members[:5]))
    nodes = [graph.nodes[c]["pb"] for c in inside_constants]
    for m in members:
        nodes += sources[m].nodes
    _check_allowed(graph, nodes)
    sub = TFSubgraph(nodes, [key for _, key, _ in inputs],
                     [sources[m].outputs[port] for m, port, _ in outputs])
    label = name or _group_name(graph, members, [(m, p) for m, p, _ in outputs])
    dead = [d for m in members for d in graph.successors(m)
            if d not in {data.id for _, _, data in outputs}]
    for m, port, data in outputs:
        graph.remove_edge(m, data.id)
    graph.remove_nodes_from(dead + members)
    new = graph.add_op(label, tf_op=OP, tf_subgraph=sub, tf_class=TFSubgraphCall, infer=TFSubgraphCall.infer,
                       framework_infer=True, input_dtypes=[dtype for _, _, dtype in inputs],
                       offloaded=[m for m in members])
    for i, (data, _, _) in enumerate(inputs):
        graph.connect(data, new, inp=i)
    for j, (_, _, data) in enumerate(outputs):
        graph.connect(new, data, out=j)
    _drop_unread_constants(graph, inside_constants)
    return new


def _check_allowed(graph, nodes) -> None:
    """Only pure computations go to TensorFlow (core/services/tf_ops.py): an op that
    reads or writes files, runs Python, aborts... is an error here, before any
    TensorFlow worker sees it."""
    from core.services import tf_ops
    source = graph.graph.get("tf_graph_def")
    found = tf_ops.refused_nodes(nodes, source.library if source is not None else _NoLibrary(), tf_ops.RUN_OPS)
    if found:
        raise Error("Cannot offload to TensorFlow: {}. mo-core runs only pure computations in TensorFlow (the "
                    "allow-list of core/services/tf_ops.py), never ops that reach files, the network, Python or the "
                    "process; leave these nodes out of the offload options, or remove them from the model.",
                    tf_ops.describe(found))


class _NoLibrary:
    function = ()


def _drop_unread_constants(graph, ops):
    """Constant producers that went inside the sub-graph and that nothing else reads."""
    for op_id in reversed(ops):
        if op_id not in graph:
            continue
        outs = list(graph.successors(op_id))
        if all(graph.out_degree(d) == 0 and not graph.nodes[d].get("is_output") for d in outs):
            graph.remove_nodes_from(outs + [op_id])


# --------------------------------------------------------------------------- lowering
def _dtype_enum(name: str, where: str) -> int:
    try:
        return TF_DTYPES[np.dtype(name)]
    except (TypeError, KeyError):
        raise Error("{} is a {} tensor; an IR tensor holds numbers.", where, name) from None


def lower_subgraph_call(node, lw):
    """The node becomes an IR TFCustomSubgraphCall layer with its self-contained GraphDef."""
    from core.ops.tf_subgraph import TFCustomSubgraphCall
    sub: TFSubgraph = node.tf_subgraph
    builder = GraphDefBuilder(lw.graph)
    builder.reserve(sub.names)
    dtypes = node.soft_get("input_dtypes") or [None] * len(sub.inputs)
    inputs = node.in_nodes()
    refs, ir_inputs, placeholders, dims = [], [], [], []
    for port, key in enumerate(sub.inputs):
        data, dtype = inputs[port], dtypes[port]
        base = "{}/input_{}".format(node.name, port)
        if data.soft_get("value") is not None:  # computed by the converter: a constant of the sub-graph now
            refs.append(builder.add_const(base, data.value, dtype))
            continue
        shape = [int(d) for d in lw.ir_shape(data)]
        ref = builder.add_placeholder(base, [-1] + shape[1:] if shape else [])  # any batch
        placeholders.append(ref)
        if lw.nchw(data):
            ref = builder.transpose(base + "/to_nhwc", ref, (0, 2, 3, 1))
        if dtype is not None and np.dtype(dtype) != np.float32:
            ref = builder.cast(base + "/cast", ref, DT_FLOAT, TF_DTYPES[np.dtype(dtype)])
        refs.append(ref)
        ir_inputs.append(data)
        dims.append(shape)
    builder.add_subgraph(sub, refs)
    output_dtypes = node.soft_get("tf_output_dtypes") or []
    outputs, shapes = [], []
    for port, data in sorted(node.out_nodes().items()):
        key = sub.outputs[port]
        ref = tensor_ref(*key)
        base = "{}/output_{}".format(node.name, port)
        dtype = output_dtypes[port] if port < len(output_dtypes) else "float32"
        if dtype != "float32":
            ref = builder.cast(base + "/cast", ref, _dtype_enum(dtype, "Output '{}' of '{}'".format(
                tensor_ref(*key), node.name)), DT_FLOAT)
        if lw.nchw(data):
            ref = builder.transpose(base + "/to_nchw", ref, (0, 3, 1, 2))
        outputs.append(ref if ":" in ref else ref + ":0")
        shapes.append([int(d) for d in lw.ir_shape(data)])
    lw.keep_inputs(node, *ir_inputs)
    lw.retype(node, TFCustomSubgraphCall, {
        "graph_def": builder.to_bytes(), "input_nodes_names": placeholders, "output_tensors_names": outputs,
        "real_input_dims": dims, "ir_output_shapes": shapes, "framework_infer": False})


# --------------------------------------------------------------------------- sub-graph replacement
def match_subgraph(graph, match) -> TFSubgraph:
    """The TFSubgraph of a sub-graph replacement's match (front form: op nodes joined
    by edges with `out`/`in` ports), for a replacing op without a shape function:
    TensorFlow then computes its shapes from the nodes it replaces (the reference
    guide's InceptionBlock). Its inputs and outputs are the match's, in order;
    constant producers the matched nodes read from outside go inside."""
    members = list(match.matched_nodes_names())
    member_set = set(members)
    missing = [graph.nodes[m].get("name", m) for m in members if graph.nodes[m].get("pb") is None]
    if missing:
        raise Error("The replaced sub-graph holds '{}', which has no TensorFlow definition: TensorFlow cannot compute "
                    "the shapes of the op replacing it. Give the op a shape function (infer).", missing[0])
    inputs, consumed = [], set()
    for i in range(match.inputs_count()):
        readers = match.input_nodes(i)
        node, port = readers[0]
        inputs.append(_front_input_key(node, port))
        consumed |= {(n.id, p) for n, p in readers}
    constants = []
    for m in members:
        for src, _, attrs in graph.in_edges(m, data=True):
            if src in member_set or (m, attrs.get("in")) in consumed:
                continue
            ops = [a for a in nx.ancestors(graph, src)] + [src]
            if any(graph.nodes[a].get("op") == "Parameter" or graph.nodes[a].get("pb") is None for a in ops):
                raise Error("Node '{}' of the replaced sub-graph reads '{}', which is not one of the match's inputs "
                            "and not a constant.", graph.nodes[m].get("name", m), graph.nodes[src].get("name", src))
            constants += [a for a in nx.topological_sort(graph.subgraph(ops)) if a not in constants]
    order = [n for n in nx.topological_sort(graph.subgraph(members))]
    nodes = [graph.nodes[c]["pb"] for c in constants] + [graph.nodes[m]["pb"] for m in order]
    outputs = []
    for i in range(match.outputs_count()):
        node, port = match.output_node(i)
        outputs.append((node.pb.name, port))
    return TFSubgraph(nodes, inputs, outputs)


def _front_input_key(node, port: int):
    """The TensorFlow tensor a node's NodeDef reads on data input `port`."""
    from core.front.tf.tf_subgraph import tensor_key
    texts = [t for t in node.pb.input if not t.startswith("^")]
    if port >= len(texts):
        raise Error("Node '{}' has no TensorFlow input {}.", node.soft_get("name"), port)
    return tensor_key(texts[port])


def offload_unlowerable(node, lw):
    """--offload_unsupported_operations_to_tf for a node lowering cannot turn into IR layers
    in the form the model uses it (an op the converter computes only at conversion time,
    working on the data; a variant its lowering does not know): it becomes a
    TFCustomSubgraphCall of its own, TensorFlow gives its output types (one round trip),
    and it is lowered as such."""
    from core.front.tf.fallback import shape_fallback
    log.warning("%s cannot be converted in the form the model uses it: it is offloaded to TensorFlow.",
                "Node '{}' ({})".format(node.name, node.soft_get("tf_op")))
    new = merge_nodes(lw.graph, [node.id])
    shape_fallback(lw.graph).compute(new)
    lower_subgraph_call(new, lw)
