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


def _constant_predicate(nodes: dict, text: str):
    """The bool value of tensor `text` when it is a Const (through Identities), else None."""
    node, port = _source(nodes, text)
    if node is None or node.op != "Const" or port != 0 or "value" not in node.attr:
        return None
    value = tensor_to_numpy(node.attr["value"].tensor, "the predicate '{}'".format(node.name))
    return bool(value.reshape(-1)[0]) if value.size == 1 and value.dtype == np.bool_ else None


def switch_placeholders(graph_def) -> list[str]:
    """The placeholders that Switches left unresolved take their predicate from (a
    training switch that --freeze_placeholder_with_value would settle)."""
    nodes = {n.name: n for n in graph_def.node}
    found = []
    for n in graph_def.node:
        if n.op in ("Switch", "RefSwitch") and len(n.input) >= 2:
            source, _ = _source(nodes, n.input[1])
            if source is not None and source.op in ("Placeholder", "PlaceholderWithDefault") \
                    and source.name not in found:
                found.append(source.name)
    return found


def _order(graph_def) -> list:
    """The nodes producers first (a cycle, as in a while loop, leaves its nodes out)."""
    nodes = {n.name: n for n in graph_def.node}
    readers: dict[str, list[str]] = {name: [] for name in nodes}
    pending = {}
    for n in graph_def.node:
        sources = {tensor_key(i.lstrip("^"))[0] for i in n.input} & nodes.keys()
        pending[n.name] = len(sources)
        for s in sources:
            readers[s].append(n.name)
    ready = [name for name, count in pending.items() if count == 0]
    order = []
    while ready:
        name = ready.pop()
        order.append(nodes[name])
        for r in readers[name]:
            pending[r] -= 1
            if pending[r] == 0:
                ready.append(r)
    return order


def _read_names(nodes) -> set[str]:
    return {tensor_key(i.lstrip("^"))[0] for n in nodes for i in n.input}


def _without_orphans(kept: list, read_before: set[str]) -> list:
    """`kept` less the nodes that only the removed or rewritten ones read (a Switch feeding
    the dead branch alone, the predicate's Identity): left, they would be taken for model
    outputs."""
    while True:
        read_now = _read_names(kept)
        orphans = {n.name for n in kept if n.name in read_before and n.name not in read_now}
        if not orphans:
            return kept
        kept = [n for n in kept if n.name not in orphans]


def resolve_constant_switches(graph_def) -> int:
    """Rewrites every Switch of a constant predicate and what follows from it (module
    doc); the number of Switches resolved."""
    nodes = {n.name: n for n in graph_def.node}
    taken = {}
    for n in graph_def.node:
        if n.op in ("Switch", "RefSwitch") and len(n.input) >= 2:
            value = _constant_predicate(nodes, n.input[1])
            if value is not None:
                taken[n.name] = int(value)  # output 1 carries the data when the predicate is true
    if not taken:
        return 0
    read_before = _read_names(graph_def.node)
    dead_nodes: set[str] = set()

    def dead(text: str) -> bool:
        name, port = tensor_key(text.lstrip("^"))
        if name in dead_nodes:
            return True
        return not text.startswith("^") and name in taken and port != taken[name]

    merges = {}  # Merge name -> index of its one live input
    for n in _order(graph_def):
        data = [i for i in n.input if not i.startswith("^")]
        control = [i for i in n.input if i.startswith("^")]
        if n.op in ("Merge", "RefMerge"):
            live = [k for k, i in enumerate(data) if not dead(i)]
            if not live or any(dead(c) for c in control):
                dead_nodes.add(n.name)
            elif len(live) == 1 and len(live) < len(data):
                merges[n.name] = live[0]
        elif any(dead(i) for i in n.input):
            dead_nodes.add(n.name)
    kept = [n for n in graph_def.node if n.name not in dead_nodes]
    for n in kept:
        if n.name in taken:  # the Switch passes its data on: an Identity of it
            data = n.input[0]
            n.op, n.input[:] = "Identity", [data] + [i for i in n.input[2:] if i.startswith("^")]
            for key in [k for k in n.attr if k != "T"]:
                del n.attr[key]
        elif n.name in merges:
            live = [i for i in n.input if not i.startswith("^")][merges[n.name]]
            n.op, n.input[:] = "Identity", [live]
            for key in [k for k in n.attr if k != "T"]:
                del n.attr[key]
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
    kept = _without_orphans(kept, read_before)
    del graph_def.node[:]
    graph_def.node.extend(kept)
    for merge, const_name in index_consts.items():
        const = graph_def.node.add(name=const_name, op="Const")
        set_const(const, np.array(merges[merge], np.int32))
    return len(taken)
