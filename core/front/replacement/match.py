"""Matching the sub-graphs a configuration file describes (core/front/custom_config.py)
and SubgraphMatch, the object the config-file replacers get.

scope: an instance is a node name prefix regex ("scope" in TensorFlow's terms); its
nodes are those whose name matches it up to a '/' (or the end of the name). Its
input tensors are those that nodes outside feed to nodes inside, its outputs those
that nodes inside feed outside (or that are model outputs). `inputs`/`outputs` of
the description name them by regexes of node names relative to the scope
(`Branch_0/Conv2D$`), each of which must pick one node of every instance.

points: the reference guide's four steps. From every start node the graph is walked
along its edges, stopping at end nodes and nodes without consumers (1); from every
matched node but the start nodes it is walked against the edges, adding what
computes their other inputs (2); every end node must have been reached (3) and no
node added in step 2 may be a model input (4).
"""
from __future__ import annotations

import re
from collections import deque

from core.errors import Error
from core.front.replacement.view import OUTPUT_OP
from core.graph.graph import Node


class SubgraphMatch:
    """A matched sub-graph: its nodes, its input tensors (each read by one or more
    nodes of the sub-graph) and its output tensors, in the description's order."""

    def __init__(self, graph, desc, node_ids, inputs: list, outputs: list, scope: str | None = None,
                 relative_names: dict | None = None):
        self.graph = graph
        self.custom_replacement_desc = desc
        self.scope = scope
        self._nodes = list(node_ids)
        self._inputs = inputs            # [[(node id, in port), ...], ...]
        self._outputs = outputs          # [(node id, out port), ...]
        self._relative = relative_names or {}

    def matched_nodes_names(self) -> list:
        return list(self._nodes)

    def inputs_count(self) -> int:
        return len(self._inputs)

    def outputs_count(self) -> int:
        return len(self._outputs)

    def input_nodes(self, port: int) -> list[tuple[Node, int]]:
        if not 0 <= port < len(self._inputs):
            raise Error("The matched sub-graph of {} has {} input tensor(s); input {} does not exist.",
                        self.custom_replacement_desc.where(), len(self._inputs), port)
        return [(Node(self.graph, node_id), in_port) for node_id, in_port in self._inputs[port]]

    def single_input_node(self, port: int) -> tuple[Node, int]:
        nodes = self.input_nodes(port)
        if len(nodes) != 1:
            raise Error("The amount of input nodes for port {} is not equal to 1: {} nodes of the sub-graph of {} "
                        "read that tensor ({}). Use match.input_nodes({}) instead.", port, len(nodes),
                        self.custom_replacement_desc.where(), ", ".join(n.soft_get("name") for n, _ in nodes), port,
                        faq=32)
        return nodes[0]

    def output_node(self, port: int) -> tuple[Node, int]:
        if not 0 <= port < len(self._outputs):
            raise Error("The matched sub-graph of {} has {} output tensor(s); output {} does not exist.",
                        self.custom_replacement_desc.where(), len(self._outputs), port)
        node_id, out_port = self._outputs[port]
        return Node(self.graph, node_id), out_port

    def node_by_pattern(self, pattern: str) -> Node:
        """The one matched node whose name (relative to the scope, for scope matches)
        matches the regex."""
        found = [n for n in self._nodes
                 if re.match(pattern, self._relative.get(n, self.graph.nodes[n].get("name", n)))]
        if len(found) != 1:
            raise Error("The amount of nodes matched pattern '{}' is not equal to 1 in the sub-graph of {}: {}.",
                        pattern, self.custom_replacement_desc.where(),
                        ", ".join(self.graph.nodes[n].get("name", n) for n in found) or "none", faq=77)
        return Node(self.graph, found[0])


# --- scope ----------------------------------------------------------------------------
def _scope_regex(instance: str):
    return re.compile(instance if instance.endswith("/") else "(?:{})(?=/|$)".format(instance))


def scope_members(graph, instance: str) -> dict:
    """{node id: name relative to the scope} of the nodes in one scope instance."""
    regex = _scope_regex(instance)
    members = {}
    for node_id, attrs in graph.nodes(data=True):
        if attrs.get("op") == OUTPUT_OP:
            continue
        name = str(attrs.get("name", node_id))
        m = regex.match(name)
        if m:
            rest = name[m.end():]
            members[node_id] = rest[1:] if rest.startswith("/") else rest
    return members


def _boundary(graph, members):
    """(input tensors {(producer, port): [(consumer, in port)]}, output tensors {(producer, port)})."""
    inputs, outputs = {}, set()
    for src, dst, attrs in graph.edges(data=True):
        if src not in members and dst in members:
            inputs.setdefault((src, attrs.get("out", 0)), []).append((dst, attrs["in"]))
        elif src in members and dst not in members:
            outputs.add((src, attrs.get("out", 0)))
    return inputs, outputs


def describe_scope(graph, desc) -> tuple[list, list]:
    """The `inputs` and `outputs` entries of a scope description, from its first
    instance, checked to name one node in every instance."""
    first = desc.instances[0]
    members = _instance_members(graph, desc, first)
    inputs, outputs = _boundary(graph, members)

    def regex(node_id):
        return re.escape(members[node_id]) + "$"
    inputs_desc = sorted(sorted([regex(n), port] for n, port in consumers) for consumers in inputs.values())
    outputs_desc = sorted([regex(n), port] for n, port in outputs)
    inputs_desc = [[{"node": r, "port": p} for r, p in tensor] for tensor in inputs_desc]
    outputs_desc = [{"node": r, "port": p} for r, p in outputs_desc]
    for instance in desc.instances:
        others = _instance_members(graph, desc, instance)
        for item in [i for tensor in inputs_desc for i in tensor] + outputs_desc:
            _resolve(graph, desc, instance, others, item["node"])
    return inputs_desc, outputs_desc


def _instance_members(graph, desc, instance: str) -> dict:
    members = scope_members(graph, instance)
    if not members:
        raise Error("The scope '{}' of {} matches no node of the model: check the instance regex against the node "
                    "names (a scope matches names that start with it, up to a '/').", instance, desc.where())
    return members


def _resolve(graph, desc, instance, members: dict, regex: str):
    found = [n for n, rel in members.items() if re.match(regex, rel)]
    if len(found) != 1:
        raise Error("The node pattern '{}' of {} picks {} nodes in the instance '{}' ({}); it must pick exactly one. "
                    "Make it longer or run --tensorflow_custom_operations_config_update on this model again.",
                    regex, desc.where(), len(found), instance,
                    ", ".join(graph.nodes[n].get("name", n) for n in found) or "none", faq=77)
    return found[0]


def scope_matches(graph, desc) -> list[SubgraphMatch]:
    """One SubgraphMatch per instance. Without `inputs`/`outputs` in the description
    they are computed as the _update option would write them."""
    inputs_desc = desc.get_inputs_description()
    outputs_desc = desc.get_outputs_description()
    if not desc.has("inputs") or not desc.has("outputs"):
        computed_in, computed_out = describe_scope(graph, desc)
        if not desc.has("inputs"):
            inputs_desc = [[(i["node"], i["port"]) for i in tensor] for tensor in computed_in]
        if not desc.has("outputs"):
            outputs_desc = [(o["node"], o["port"]) for o in computed_out]
    matches = []
    for instance in desc.instances:
        members = _instance_members(graph, desc, instance)
        inputs = [[(_resolve(graph, desc, instance, members, r), port) for r, port in tensor]
                  for tensor in inputs_desc]
        outputs = [(_resolve(graph, desc, instance, members, r), port) for r, port in outputs_desc]
        matches.append(SubgraphMatch(graph, desc, members, inputs, outputs, scope=instance,
                                     relative_names=members))
    return matches


# --- points ---------------------------------------------------------------------------
def _nodes_by_name(graph, desc, names: list[str], what: str) -> list:
    index = {}
    for node_id, attrs in graph.nodes(data=True):
        if attrs.get("op") != OUTPUT_OP:
            index.setdefault(str(attrs.get("name", node_id)), node_id)
    missing = [n for n in names if n not in index]
    if missing:
        raise Error("The {} {} of {} {} not in the model (after --input/--output cutting): check the node names.",
                    what, ", ".join("'{}'".format(n) for n in missing), desc.where(),
                    "is" if len(missing) == 1 else "are")
    return [index[n] for n in names]


def _is_model_input(attrs) -> bool:
    return attrs.get("op") == "Parameter"


def points_match(graph, desc) -> SubgraphMatch:
    starts = _nodes_by_name(graph, desc, desc.start_points, "start point(s)")
    ends = _nodes_by_name(graph, desc, desc.end_points, "end point(s)")
    start_set, end_set = set(starts), set(ends)

    # 1: forward from the start nodes (or their consumers when the starts stay outside)
    queue = deque(starts if desc.include_inputs else [d for s in starts for d in graph.successors(s)])
    reached = set()
    while queue:
        node = queue.popleft()
        if node in reached or graph.nodes[node].get("op") == OUTPUT_OP:
            continue
        reached.add(node)
        if node in end_set:
            continue
        queue.extend(graph.successors(node))
    # 3: every end node was reached
    unreached = [e for e in ends if e not in reached]
    if unreached:
        raise Error("End node '{}' is not reachable from start nodes: {} ({}).",
                    graph.nodes[unreached[0]].get("name"), ", ".join(desc.start_points), desc.where(), faq=73)
    inside = set(reached)
    if not desc.include_inputs:
        inside -= start_set
    if not desc.include_outputs:
        inside -= end_set
    # 2: against the edges from every inside node but the starts: what computes their other inputs
    added = set()
    queue = deque(p for n in inside - start_set for p in graph.predecessors(n))
    while queue:
        node = queue.popleft()
        if node in inside or node in added or node in start_set or node in end_set:
            continue
        added.add(node)
        queue.extend(graph.predecessors(node))
    # 4: a side branch that reaches a model input means the points are wrong
    for node in sorted(added, key=str):
        if _is_model_input(graph.nodes[node]):
            raise Error("Sub-graph contains network input node '{}': the sub-graph of {} between the start and end "
                        "points reads the model's input through a side branch. Add the node that reads it to the "
                        "start points.", graph.nodes[node].get("name"), desc.where(), faq=74)
    nodes = inside | added
    if desc.include_inputs:
        inputs = [[(s, 0)] for s in starts]
    else:
        inputs = [[(d, attrs["in"]) for _, d, attrs in graph.out_edges(s, data=True) if d in nodes] for s in starts]
    if desc.include_outputs:
        outputs = [(e, 0) for e in ends]
    else:
        outputs = []
        for e in ends:
            src = [(u, attrs.get("out", 0)) for u, _, attrs in graph.in_edges(e, data=True) if attrs.get("in") == 0]
            outputs.append(src[0])
    return SubgraphMatch(graph, desc, sorted(nodes, key=str), inputs, outputs)


def matches_of(graph, desc) -> list[SubgraphMatch]:
    if desc.match_kind == "scope":
        return scope_matches(graph, desc)
    if desc.match_kind == "points":
        return [points_match(graph, desc)]
    raise Error("Unsupported match kind '{}' of {}. Match kinds \"points\" or \"scope\" are supported only.",
                desc.match_kind, desc.where(), faq=34)
