"""TF1 control flow with a constant predicate, resolved in the GraphDef before the
graph is built, as the reference did: `tf.cond(is_training, ...)` leaves Switch /
Merge pairs that no IR holds, and once the predicate is a constant (a Const, e.g.
after --freeze_placeholder_with_value is_training->False, through Identity chains)
only one branch can run. The other is dead - TensorFlow's rule: a node with a dead
input (data or control) is dead, a Merge only when all its inputs are - and is
removed; the Switch becomes an Identity of its data, the Merge an Identity of its
one live input (its value_index output a Const).

Control flow v2 (If / StatelessIf calling functions) is not resolved here.
"""
from __future__ import annotations

import numpy as np

from core.front.tf.tensors import tensor_to_numpy
from core.front.tf.tf_subgraph import set_const, tensor_key

SWITCHES, MERGES = ("Switch", "RefSwitch"), ("Merge", "RefMerge")


def _source(nodes: dict, text: str):
    """The node a tensor comes from through Identities."""
    name, port = tensor_key(text)
    seen = set()
    while name in nodes and nodes[name].op == "Identity" and port == 0 and name not in seen:
        seen.add(name)
        inputs = [i for i in nodes[name].input if not i.startswith("^")]
        if not inputs:
            break
        name, port = tensor_key(inputs[0])
    return nodes.get(name), port


def _predicate(nodes: dict, taken: dict, text: str, depth: int = 0):
    """The constant bool tensor `text` holds, else None: a Const through Identities, a
    resolved Switch's live output (its data: a nested cond's predicate), a LogicalNot of one."""
    node, port = _source(nodes, text)
    if node is None or depth > 64:
        return None
    data = [i for i in node.input if not i.startswith("^")]
    if data and node.op in SWITCHES and taken.get(node.name) == port:
        return _predicate(nodes, taken, data[0], depth + 1)
    if node.op == "LogicalNot" and data:
        value = _predicate(nodes, taken, data[0], depth + 1)
        return None if value is None else not value
    if node.op != "Const" or port != 0 or "value" not in node.attr:
        return None
    value = tensor_to_numpy(node.attr["value"].tensor, "the predicate '{}'".format(node.name))
    return bool(value.reshape(-1)[0]) if value.size == 1 and value.dtype == np.bool_ else None


def switch_placeholders(graph_def) -> list[str]:
    """The placeholders that Switches left unresolved take their predicate from (a
    training switch that --freeze_placeholder_with_value would settle)."""
    nodes = {n.name: n for n in graph_def.node}
    found = []
    for n in graph_def.node:
        if n.op in SWITCHES and len(n.input) >= 2:
            source, _ = _source(nodes, n.input[1])
            if source is not None and source.op in ("Placeholder", "PlaceholderWithDefault") \
                    and source.name not in found:
                found.append(source.name)
    return found


def _is_dead(text: str, dead_nodes: set, taken: dict) -> bool:
    name, port = tensor_key(text.lstrip("^"))
    return name in dead_nodes or (not text.startswith("^") and name in taken and port != taken[name])


def _dead(graph_def, taken: dict) -> set[str]:
    """The nodes that never run (TensorFlow's deadness), to a fixed point: a node with a dead
    input is dead, a Merge when all its data inputs are (or a control input is); loops and
    what follows them included."""
    dead_nodes: set[str] = set()
    changed = True
    while changed:
        changed = False
        for n in graph_def.node:
            if n.name in dead_nodes:
                continue
            if n.op in MERGES:
                data = [i for i in n.input if not i.startswith("^")]
                dead = all(_is_dead(i, dead_nodes, taken) for i in data) or any(
                    _is_dead(i, dead_nodes, taken) for i in n.input if i.startswith("^"))
            else:
                dead = any(_is_dead(i, dead_nodes, taken) for i in n.input)
            if dead:
                dead_nodes.add(n.name)
                changed = True
    return dead_nodes


def read_names(nodes) -> set[str]:
    return {tensor_key(i.lstrip("^"))[0] for n in nodes for i in n.input}


def without_orphans(kept: list, read_before: set[str]) -> list:
    """`kept` less the nodes that only the removed or rewritten ones read (a Switch feeding
    the dead branch alone, the predicate's Identity): left, they would be taken for model
    outputs."""
    while True:
        read_now = read_names(kept)
        orphans = {n.name for n in kept if n.name in read_before and n.name not in read_now}
        if not orphans:
            return kept
        kept = [n for n in kept if n.name not in orphans]


def _to_identity(node, inputs: list) -> None:
    node.op, node.input[:] = "Identity", inputs
    for key in [k for k in node.attr if k != "T"]:
        del node.attr[key]


def resolve_constant_switches(graph_def) -> int:
    """Rewrites every Switch of a constant predicate and what follows from it (module
    doc); the number of Switches resolved."""
    nodes = {n.name: n for n in graph_def.node}
    taken: dict[str, int] = {}  # output 1 carries the data when the predicate is true
    while True:  # (a nested cond's predicate is known once the outer Switch is)
        found = {n.name: int(value) for n in graph_def.node if n.op in SWITCHES and n.name not in taken
                 and len(n.input) >= 2 and (value := _predicate(nodes, taken, n.input[1])) is not None}
        if not found:
            break
        taken.update(found)
    if not taken:
        return 0
    read_before = read_names(graph_def.node)
    dead_nodes = _dead(graph_def, taken)
    merges = {}  # Merge name -> index of its one live input
    for n in graph_def.node:
        if n.op in MERGES and n.name not in dead_nodes:
            data = [i for i in n.input if not i.startswith("^")]
            live = [k for k, i in enumerate(data) if not _is_dead(i, dead_nodes, taken)]
            if len(live) == 1 < len(data):
                merges[n.name] = live[0]
    kept = [n for n in graph_def.node if n.name not in dead_nodes]
    for n in kept:
        if n.name in taken:  # the Switch passes its data on
            _to_identity(n, [n.input[0]] + [i for i in n.input[2:] if i.startswith("^")])
        elif n.name in merges:  # the Merge its one live input
            _to_identity(n, [[i for i in n.input if not i.startswith("^")][merges[n.name]]])
    index_consts = {}
    for n in kept:  # readers of a Switch's taken port read the Identity; of a Merge's value_index, a Const
        for k, text in enumerate(n.input):
            if text.startswith("^"):
                continue
            name, port = tensor_key(text)
            if name in taken and port:
                n.input[k] = name
            elif name in merges and port == 1:
                n.input[k] = index_consts.setdefault(name, name + "/value_index")
    # control inputs on the resolved Switches and on the Identities of their outputs (tf.cond's switch_t /
    # switch_f, which branch constants wait for) order nothing any more: left, they kept those as outputs
    anchors = set(taken) | {n.name for n in kept if n.op == "Identity" and n.input
                            and tensor_key(n.input[0].lstrip("^"))[0] in taken}
    for n in kept:
        n.input[:] = [i for i in n.input if not (i.startswith("^") and i[1:] in anchors)]
    kept = without_orphans(kept, read_before | anchors)  # (an unread switch_t / switch_f was a sink already)
    del graph_def.node[:]
    graph_def.node.extend(kept)
    for merge, const_name in index_consts.items():
        const = graph_def.node.add(name=const_name, op="Const")
        set_const(const, np.array(merges[merge], np.int32))
    return len(taken)
