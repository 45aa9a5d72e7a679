"""Sub-graph isomorphism patterns (FrontReplacementSubgraph.pattern()).

A pattern is the reference guide's dictionary:

    dict(nodes=[("mean", dict(op="Mean")), ...],          # alias, wanted attributes
         edges=[("mean", "stop_grad", {"in": 0}), ...],    # alias -> alias, wanted edge attributes
         node_attrs=["op"], edge_attrs=["in"])             # the attribute names compared (default: all given)

A wanted value is compared with ==, numpy arrays element-wise, or is a predicate:
`dict(op="Power", power=lambda p: p == 2)` (it is called with the node's value,
None when the node has no such attribute). Matching is networkx's VF2 induced
sub-graph isomorphism, as in the reference: matched nodes have exactly the
pattern's edges among them (other edges into or out of the match are free).
"""
from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
from networkx.algorithms import isomorphism

from core.errors import Error
from core.front.replacement.view import OUTPUT_OP
from core.graph.graph import Node


def _equal(actual, wanted) -> bool:
    if callable(wanted):
        return bool(wanted(actual))
    if isinstance(actual, np.ndarray) or isinstance(wanted, np.ndarray):
        try:
            return bool(np.array_equal(np.asarray(actual), np.asarray(wanted)))
        except (TypeError, ValueError):
            return False
    try:
        return bool(actual == wanted)
    except (TypeError, ValueError):  # e.g. a list against an array of another length
        return False


def _includes(attrs: dict, wanted: dict, names) -> bool:
    for key in names if names is not None else wanted:
        if key not in wanted:
            continue
        value = wanted[key]
        if key not in attrs and not callable(value):
            return False
        if not _equal(attrs.get(key), value):
            return False
    return True


def _edges_match(graph_edges: dict, pattern_edges: dict, names) -> bool:
    """Every pattern edge between two nodes matches a different graph edge between them."""
    wanted = list(pattern_edges.values())
    have = list(graph_edges.values())
    if len(wanted) > len(have):
        return False
    for chosen in itertools.permutations(have, len(wanted)):
        if all(_includes(g, p, names) for g, p in zip(chosen, wanted)):
            return True
    return False


def _pattern_graph(nodes, edges) -> nx.MultiDiGraph:
    pattern = nx.MultiDiGraph()
    for item in nodes:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[1], dict)):
            raise Error("A pattern node must be (alias, {{attributes}}), got {!r}.", item)
        pattern.add_node(item[0], **item[1])
    for item in edges:
        if not (isinstance(item, (tuple, list)) and len(item) in (2, 3)):
            raise Error("A pattern edge must be (alias, alias) or (alias, alias, {{attributes}}), got {!r}.", item)
        src, dst = item[0], item[1]
        for alias in (src, dst):
            if alias not in pattern:
                raise Error("The pattern edge {!r} names '{}', which is not among the pattern's nodes.", item, alias)
        pattern.add_edge(src, dst, **(item[2] if len(item) == 3 else {}))
    return pattern


def find_pattern_matches(graph, nodes, edges, node_attrs=None, edge_attrs=None) -> list[dict[str, Node]]:
    """Every match of the pattern in the (front-form) graph: [{alias: Node}]."""
    pattern = _pattern_graph(nodes, edges)
    wanted = [attrs for _, attrs in pattern.nodes(data=True)]
    # only nodes that fit some pattern node can be in a match; with induced matching the
    # edges among them are all that counts, so the search runs on that part alone
    candidates = [n for n, attrs in graph.nodes(data=True)
                  if attrs.get("op") != OUTPUT_OP and any(_includes(attrs, w, node_attrs) for w in wanted)]
    part = graph.subgraph(candidates)
    matcher = isomorphism.MultiDiGraphMatcher(
        part, pattern, node_match=lambda g, p: _includes(g, p, node_attrs),
        edge_match=lambda g, p: _edges_match(g, p, edge_attrs))
    return [{alias: Node(graph, node_id) for node_id, alias in mapping.items()}
            for mapping in matcher.subgraph_isomorphisms_iter()]


def apply_pattern(graph, nodes, edges, action, node_attrs=None, edge_attrs=None):
    """Calls action(graph, match) for every match whose nodes all still exist (an
    earlier action of the same pattern may have removed some)."""
    for match in find_pattern_matches(graph, nodes, edges, node_attrs, edge_attrs):
        if all(node.id in graph for node in match.values()):
            action(graph, match)
