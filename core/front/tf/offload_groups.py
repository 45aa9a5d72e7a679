"""Which nodes become one TFCustomSubgraphCall: groups of op nodes that can be
merged into a single node without making the graph cyclic.

Merging nodes A and C into one node is impossible when a path from A to C runs
through a node outside the group (A -> B -> C): TensorFlow would need B's
result in the middle of the call. `acyclic_groups` splits a set of nodes into
the fewest such groups: each node gets a stage, the number of times a path from
the graph's inputs to it must leave the set and come back; nodes of one stage
never have an outside path between them, and stages only feed later stages.

A TF1 while loop holds cycles (NextIteration -> Merge), each a strongly connected
component ordered as one unit (`topological_units`); TensorFlow runs a loop only
as a whole frame, so one member of it brings the frame in (`with_whole_loops`).
"""
from __future__ import annotations

import networkx as nx

from core.errors import Error

ENTERS = ("Enter", "RefEnter")
EXITS = ("Exit", "RefExit")


def op_producers(graph, op_id) -> list:
    """The op nodes whose outputs `op_id` reads (through data nodes)."""
    result = []
    for data in graph.predecessors(op_id):
        result.extend(graph.predecessors(data))
    return result


def _loops(graph) -> list[set]:
    """The op ids of each cycle (a TF1 while loop's body with its Merge and NextIteration nodes)."""
    if nx.is_directed_acyclic_graph(graph):
        return []
    return [{n for n in c if graph.nodes[n].get("kind") == "op"} for c in nx.strongly_connected_components(graph)
            if len(c) > 1]


def _frame_of(graph, op) -> str | None:
    pb = graph.nodes[op].get("pb")
    if graph.nodes[op].get("tf_op") not in ENTERS or pb is None or "frame_name" not in pb.attr:
        return None
    return pb.attr["frame_name"].s


def with_whole_loops(graph, members) -> list:
    """`members` plus the whole frame of each loop one of them is in: the frame's Enter nodes (they
    share its frame_name), what they feed up to its Exit nodes, and the cycles themselves (an outer
    loop's cycle runs through an inner loop's Exit)."""
    members = list(members)
    chosen = set(members)
    for loop in _loops(graph):
        if not loop & chosen:
            continue
        frames = {_frame_of(graph, p) for op in loop for p in op_producers(graph, op)} - {None}
        frame = set(loop) | {n for n in graph.nodes if graph.nodes[n].get("kind") == "op" and _frame_of(graph, n)
                             in frames}
        stack = list(frame)  # (a Switch of the cycle feeds its Exit directly: not only what the Enters reach)
        while stack:
            op = stack.pop()
            for data in graph.successors(op):
                for reader in graph.successors(data):
                    if reader not in frame:
                        frame.add(reader)
                        if graph.nodes[reader].get("tf_op") not in EXITS:
                            stack.append(reader)
        members += [n for n in graph.nodes if n in frame - chosen]  # (the model's order)
        chosen |= frame
    return members


def topological_units(graph) -> list[list]:
    """The op ids in topological order, as units: one op, or the ops of one cycle together (in
    the model's order)."""
    condensed = nx.condensation(graph)
    order = None  # (the model's order, made once a cycle needs it)
    units = []
    for c in nx.topological_sort(condensed):
        unit = [n for n in condensed.nodes[c]["members"] if graph.nodes[n].get("kind") == "op"]
        if len(unit) > 1:
            order = order or {n: i for i, n in enumerate(graph.nodes)}
            unit.sort(key=order.get)
        if unit:
            units.append(unit)
    return units


def acyclic_groups(graph, members) -> list[list]:
    """`members` (op node ids) split into groups that can each be one node, in
    topological order; each group's ids in topological order."""
    members = set(members)
    stage, reach = {}, {}
    units = topological_units(graph)
    for unit in units:
        inside = set(unit)
        producers = [p for op in unit for p in op_producers(graph, op) if p not in inside]
        if len(unit) > 1 and len(inside & members) not in (0, len(unit)):
            raise Error("Only part of the loop of '{}' would go to TensorFlow: offload a loop whole (all of "
                        "its nodes).", graph.nodes[unit[0]].get("name"))
        if unit[0] in members:
            s = 0
            for p in producers:
                if p in members:
                    s = max(s, stage[p])
                elif reach.get(p, -1) >= 0:
                    s = max(s, reach[p] + 1)
        else:
            s = max((reach.get(p, -1) for p in producers), default=-1)
        for op in unit:
            reach[op] = s
            if op in members:
                stage[op] = s
    groups: dict[int, list] = {}
    for unit in units:
        for op in unit:
            if op in members:
                groups.setdefault(stage[op], []).append(op)
    return [groups[s] for s in sorted(groups)]


def connected_groups(graph, members) -> list[set]:
    """The sets of `members` connected by direct edges (through one data node)."""
    members = set(members)
    links = nx.Graph()
    links.add_nodes_from(members)
    for op in members:
        for p in op_producers(graph, op):
            if p in members:
                links.add_edge(p, op)
    return [set(c) for c in nx.connected_components(links)]


def outside_path(graph, group) -> tuple | None:
    """(from member, outside op, to member) of a path that leaves `group` and comes
    back (what makes merging it impossible), or None."""
    group = set(group)
    for member in group:
        for data in graph.successors(member):
            for consumer in graph.successors(data):
                if consumer in group:
                    continue
                later = nx.descendants(graph, consumer)
                back = [g for g in group if g in later]
                if back:
                    return member, consumer, back[0]
    return None
