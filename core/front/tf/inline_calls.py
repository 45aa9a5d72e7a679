"""Function calls of a frozen graph inlined into it, before the graph is built: a
PartitionedCall / StatefulPartitionedCall of a library function becomes the
function's nodes (named `<call>/<node>`), its inputs the call's, the call's outputs
the function's return values. An If / StatelessIf (TF2's tf.cond) whose predicate is a
constant (a frozen is_training, through Identity nodes) is a call of the branch it takes. Keras 3 puts a grouped Conv2D into a function of its
own (`_conv_xla`, marked no-inline, which freezing keeps), so ConvNeXt's and
ResNeXt's convolutions arrived as one opaque call.

Inside a function a node's output is named `node:<output arg>:<index>`; its port
in a GraphDef is the index counted from the op's first output argument. Most ops
have one output argument (the port is the index); those with several are listed in
_OUTPUT_ARGS. A call whose body names another argument of an op not listed, uses
attribute placeholders (a polymorphic function), runs an op that is not a pure
computation (tf_ops.RUN_OPS: a write would vanish with the call) or is nested
deeper than _MAX_DEPTH stays a call (the unsupported-op report, or the offload's
allow-list, names it).
"""
from __future__ import annotations

from core.front.tf.tf_subgraph import tensor_key
from core.services import tf_ops

CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
IF_OPS = ("If", "StatelessIf")
_MAX_DEPTH = 8
# output arguments in order, of the multi-output ops a converted body may hold
_OUTPUT_ARGS = {
    "FusedBatchNorm": ("y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"),
    "FusedBatchNormV2": ("y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"),
    "FusedBatchNormV3": ("y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2",
                         "reserve_space_3"),
    "TopKV2": ("values", "indices"), "Switch": ("output_false", "output_true"), "Merge": ("output", "value_index"),
    "Unique": ("y", "idx"), "NonMaxSuppressionV4": ("selected_indices", "valid_outputs"),
    "NonMaxSuppressionV5": ("selected_indices", "selected_scores", "valid_outputs"),
}


class _Unknown(Exception):
    """A body this module cannot inline faithfully."""


def _port(node_def, arg: str, index: int) -> int:
    names = _OUTPUT_ARGS.get(node_def.op)
    if names is None:
        return index  # (one output argument: a list's items or the one tensor)
    if arg not in names:
        raise _Unknown(f"{node_def.op} has no output '{arg}'")
    return names.index(arg) + index  # (list-typed arguments never follow another here)


def _inner_ref(text: str, nodes: dict, args: dict, prefix: str) -> str:
    """A function-body input reference as a GraphDef one (`args`: input arg -> outer tensor)."""
    control = text.startswith("^")
    name = text.lstrip("^")
    parts = name.split(":")
    if parts[0] in args and len(parts) == 1:
        outer = args[parts[0]]
        return "^" + tensor_key(outer)[0] if control else outer
    if parts[0] not in nodes:
        raise _Unknown(f"the body reads '{name}', which it does not define")
    if control:
        return "^" + prefix + parts[0]
    port = 0 if len(parts) == 1 else _port(nodes[parts[0]], parts[1], int(parts[2]) if len(parts) > 2 else 0)
    return prefix + parts[0] + (f":{port}" if port else "")


def _body(call, fdef) -> tuple[list, list]:
    """(the function's nodes as the graph's, the outer tensor of each call output)."""
    data_inputs = [i for i in call.input if not i.startswith("^")]
    signature = fdef.signature
    if len(data_inputs) != len(signature.input_arg):
        raise _Unknown("the call's inputs do not match the function's arguments")
    args = {arg.name: data_inputs[k] for k, arg in enumerate(signature.input_arg)}
    nodes = {n.name: n for n in fdef.node_def}
    impure = sorted({n.op for n in fdef.node_def} - tf_ops.RUN_OPS - set(CALL_OPS))
    if impure:  # (inlined, a side effect the IR drops would vanish silently: the call stays, the allow-list says)
        raise _Unknown(f"the function runs {', '.join(impure)}")
    prefix = call.name + "/"
    made = []
    for node_def in fdef.node_def:
        if any(value.placeholder for value in node_def.attr.values()):
            raise _Unknown("a polymorphic function (attribute placeholders)")
        new = type(node_def)()
        new.CopyFrom(node_def)
        new.name = prefix + node_def.name
        new.input[:] = [_inner_ref(i, nodes, args, prefix) for i in node_def.input]
        new.device = ""
        made.append(new)
    outputs = [_inner_ref(fdef.ret[arg.name], nodes, args, prefix) for arg in signature.output_arg]
    return made, outputs


def _constant_branch(node, by_name: dict) -> tuple | None:
    """(the branch function's name, the branch's arguments) of an If whose predicate is a constant, else None."""
    data = [i for i in node.input if not i.startswith("^")]
    source = by_name.get(tensor_key(data[0])[0]) if data else None
    while source is not None and source.op in ("Identity", "StopGradient") and source.input:
        source = by_name.get(tensor_key(source.input[0])[0])
    if source is None or source.op != "Const":
        return None
    tensor = source.attr["value"].tensor
    values = list(tensor.bool_val) or list(tensor.int_val) or list(tensor.tensor_content)
    if len(values) != 1:
        return None
    branch = node.attr["then_branch" if values[0] else "else_branch"].func.name
    return branch, data[1:] + [i for i in node.input if i.startswith("^")]


def _calls(graph_def, functions: dict) -> list:
    """(node, call, function) of each call to inline: calls of library functions, and each If on a constant as
    a call of its branch (`call`: the node to inline as a call)."""
    by_name = {n.name: n for n in graph_def.node}
    found = []
    for node in graph_def.node:
        if node.op in CALL_OPS and node.attr["f"].func.name in functions:
            found.append((node, node, functions[node.attr["f"].func.name]))
        elif node.op in IF_OPS:
            taken = _constant_branch(node, by_name)
            if taken is not None and taken[0] in functions:
                call = type(node)(name=node.name, op="PartitionedCall")
                call.input.extend(taken[1])
                found.append((node, call, functions[taken[0]]))
    return found


def inline_calls(graph_def) -> list[str]:
    """Inlines the graph's function calls (module doc); the names of the calls inlined."""
    functions = {f.signature.name: f for f in graph_def.library.function}
    inlined = []
    for _ in range(_MAX_DEPTH):
        done = False
        for original, call, function in _calls(graph_def, functions):
            try:
                made, outputs = _body(call, function)
            except (_Unknown, ValueError, IndexError):
                continue
            renamed = {call.name: outputs[0]} if outputs else {}
            renamed.update({f"{call.name}:{k}": out for k, out in enumerate(outputs)})
            # (a control input on the call waits for the node of its first output now)
            after = "^" + tensor_key(outputs[0].lstrip("^"))[0] if outputs else None
            for node in graph_def.node:
                node.input[:] = [i for i in (renamed.get(i, i) if not i.startswith("^") else
                                             (after if i == "^" + call.name else i) for i in node.input) if i]
            graph_def.node.remove(original)
            graph_def.node.extend(made)
            inlined.append(call.name)
            done = True
        if not done:
            break
    return inlined
