"""Which nodes become one TFCustomSubgraphCall: groups of op nodes that can be
merged into a single node without making the graph cyclic.

Merging nodes A and C into one node is impossible when a path from A to C runs
through a node outside the group (A -> B -> C): TensorFlow would need B's
result in the middle of the call. `acyclic_groups` splits a set of nodes into
the fewest such groups: each node gets a stage, the number of times a path from
the graph's inputs to it must leave the set and come back; nodes of one stage
never have an outside path between them, and stages only feed later stages.
"""
from __future__ import annotations

import networkx as nx


def op_producers(graph, op_id) -> list:
    """The op nodes whose outputs `op_id` reads (through data nodes)."""
    result = []
    for data in graph.predecessors(op_id):
        result.extend(graph.predecessors(data))
    return result


def acyclic_groups(graph, members) -> list[list]:
    """`members` (op node ids) split into groups that can each be one node, in
    topological order; each group's ids in topological order."""
    members = set(members)
    stage, reach = {}, {}
    order = [n for n in nx.topological_sort(graph) if graph.nodes[n].get("kind") == "op"]
    for op in order:
        producers = op_producers(graph, op)
        if op in members:
            s = 0
            for p in producers:
                if p in members:
                    s = max(s, stage[p])
                elif reach.get(p, -1) >= 0:
                    s = max(s, reach[p] + 1)
            stage[op] = reach[op] = s
        else:
            reach[op] = max((reach.get(p, -1) for p in producers), default=-1)
    groups: dict[int, list] = {}
    for op in order:
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
