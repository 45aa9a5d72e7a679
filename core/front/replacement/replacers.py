"""The replacer classes of the reference guide's "Sub-graph Replacement in the
Model Optimizer", with its names and semantics:

- FrontReplacementPattern: the base; `find_and_replace_pattern(graph)`;
  `run_after()` / `run_before()` return the replacer classes this one must run
  after / before (the runner orders by them, otherwise keeping its default order).
- FrontReplacementSubgraph: `pattern()` (core/front/replacement/pattern.py) and
  `replace_sub_graph(graph, match)`; the default replace_sub_graph calls
  `generate_sub_graph`, rewires the matched sub-graph's inputs and outputs with
  `input_edges_match` / `output_edges_match` and removes `nodes_to_remove`.
- FrontReplacementOp: `op` (the operation to replace) and `replace_op(graph, node)`
  returning the new nodes that produce the matched node's outputs, in port order:
  node ids (or Nodes) for port 0, `(id, port)` tuples otherwise. The matched node
  is removed.

They run during the front replacement step (core/front/replacement/runner.py) on the
front form of the graph (core/front/replacement/view.py): op nodes only, edges with
`out`/`in` ports, `node.in_node(i)` is the producer. Defining a subclass registers
it; `enabled = False` turns it off. A replacer applies to every framework, unless
its module sits under a `caffe` or `tf` folder (front/caffe/, front/tf/ of an
--extensions directory) or it sets `framework = "caffe"` / `"tf"`.
"""
from __future__ import annotations

from core.errors import Error
from core.front.replacement.pattern import apply_pattern
from core.front.replacement.view import OUTPUT_OP
from core.graph.graph import Node


class FrontReplacementPattern:
    enabled = True
    framework: str | None = None
    registered: list[type] = []     # runnable subclasses, in definition order
    _registers_when_set: str | None = None  # the class attribute that makes a subclass runnable (op, replacement_id)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("_api_base") and cls.runnable():
            FrontReplacementPattern.registered.append(cls)

    @classmethod
    def runnable(cls) -> bool:
        if cls._registers_when_set:
            return getattr(cls, cls._registers_when_set) is not None
        return cls.find_and_replace_pattern is not FrontReplacementPattern.find_and_replace_pattern

    @classmethod
    def applies_to(cls, framework: str) -> bool:
        own = cls.framework or _framework_of(cls.__module__)
        return own is None or own == framework

    def find_and_replace_pattern(self, graph):
        raise NotImplementedError

    def run_after(self) -> list:
        return []

    def run_before(self) -> list:
        return []


def _framework_of(module: str) -> str | None:
    parts = module.split(".")
    for framework in ("caffe", "tf"):
        if framework in parts:
            return framework
    return None


class FrontReplacementSubgraph(FrontReplacementPattern):
    _api_base = True
    @classmethod
    def runnable(cls) -> bool:
        if cls._registers_when_set:
            return super().runnable()
        return (cls.pattern is not FrontReplacementSubgraph.pattern
                or cls.find_and_replace_pattern is not FrontReplacementSubgraph.find_and_replace_pattern)

    def pattern(self) -> dict:
        raise NotImplementedError

    def find_and_replace_pattern(self, graph):
        pattern = self.pattern()
        if not isinstance(pattern, dict) or "nodes" not in pattern:
            raise Error("pattern() must return dict(nodes=[...], edges=[...], node_attrs=[...], edge_attrs=[...]), "
                        "got {!r}.", pattern)
        apply_pattern(graph, pattern["nodes"], pattern.get("edges", []), self.replace_sub_graph,
                      pattern.get("node_attrs"), pattern.get("edge_attrs"))

    # --- the default replacement: generate, rewire, remove ------------------------
    def replace_sub_graph(self, graph, match):
        new_sub_graph = self.generate_sub_graph(graph, match) or {}
        inputs = _normalize(graph, self.input_edges_match(graph, match, new_sub_graph), new_sub_graph, "input")
        outputs = _normalize(graph, self.output_edges_match(graph, match, new_sub_graph), new_sub_graph, "output")
        replace_input_edges(graph, inputs)
        replace_output_edges(graph, outputs)
        remove_nodes(graph, self.nodes_to_remove(graph, match))

    def generate_sub_graph(self, graph, match) -> dict:
        return {}

    def input_edges_match(self, graph, match, new_sub_graph: dict) -> dict:
        return {}

    def output_edges_match(self, graph, match, new_sub_graph: dict) -> dict:
        return {}

    def nodes_to_remove(self, graph, match) -> list:
        if isinstance(match, dict):
            return [node.id for node in match.values()]
        return match.matched_nodes_names()


class FrontReplacementOp(FrontReplacementSubgraph):
    _api_base = True
    _registers_when_set = "op"
    op: str | None = None

    def pattern(self) -> dict:
        return dict(nodes=[("op", dict(op=self.op))], edges=[])

    def replace_op(self, graph, node: Node):
        raise NotImplementedError

    def replace_sub_graph(self, graph, match):
        node = match["op"]
        produced = self.replace_op(graph, node)
        if produced is None:  # replace_op rewired everything itself
            return
        if not isinstance(produced, (list, tuple)):
            raise Error("replace_op must return a list with one entry per output port of '{}' (a node id, a Node, "
                        "or an (id, port) tuple), got {!r}.", node.soft_get("name"), produced)
        used = sorted({attrs.get("out", 0) for _, _, attrs in graph.out_edges(node.id, data=True)})
        missing = [port for port in used if port >= len(produced)]
        if missing:
            raise Error("replace_op returned {} output(s) for '{}', but its output port {} is read by other nodes: "
                        "return one entry per output port.", len(produced), node.soft_get("name"), missing[0])
        mapping = {(node.id, port): _endpoint(graph, item, {}, "output") for port, item in enumerate(produced)}
        if any(new == node.id for new, _ in mapping.values()):
            raise Error("replace_op of '{}' returned the node it replaces; return the new nodes that produce its "
                        "outputs (or None after rewiring them yourself).", node.soft_get("name"))
        replace_output_edges(graph, mapping)
        graph.remove_node(node.id)


# --- rewiring helpers (the default replacement and the config-file replacers) ---------
def _endpoint(graph, item, new_sub_graph: dict, what: str) -> tuple:
    """A node id or alias, a Node, or a tuple of one with a port -> (node id, port)."""
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], int):
        node, port = item
    else:
        node, port = item, 0
    if isinstance(node, Node):
        node = node.id
    if node not in graph and node in new_sub_graph:
        node = new_sub_graph[node].id
    if node not in graph:
        raise Error("The {} edge mapping names node '{}', which is not in the graph (give a node id, a Node or an "
                    "alias of generate_sub_graph's result).", what, node)
    return node, port


def _normalize(graph, mapping: dict, new_sub_graph: dict, what: str) -> dict:
    if not isinstance(mapping, dict):
        raise Error("{}_edges_match must return a dict {{(old node, port): (new node, port)}}, got {!r}.", what,
                    mapping)
    return {_endpoint(graph, old, new_sub_graph, what): _endpoint(graph, new, new_sub_graph, what)
            for old, new in mapping.items()}


def replace_input_edges(graph, mapping: dict):
    """{(old consumer, in port): (new consumer, in port)}: the tensor read by the old
    consumer's port is read by the new one's instead (once, even if several old
    consumers read it)."""
    moves = []
    for (old, old_port), (new, new_port) in mapping.items():
        edges = [(src, key, attrs) for src, _, key, attrs in graph.in_edges(old, keys=True, data=True)
                 if attrs.get("in") == old_port]
        if not edges:
            raise Error("Input port {} of node '{}' is not connected, so it cannot be moved to node '{}'.", old_port,
                        graph.nodes[old].get("name", old), graph.nodes[new].get("name", new))
        moves.append((old, edges[0], new, new_port))
    for old, (src, key, attrs), new, new_port in moves:
        if graph.has_edge(src, old, key):
            graph.remove_edge(src, old, key)
        existing = [(s, a) for s, _, a in graph.in_edges(new, data=True) if a.get("in") == new_port]
        if existing:
            if any(s != src or a.get("out", 0) != attrs.get("out", 0) for s, a in existing):
                raise Error("Input port {} of node '{}' would be connected twice, to different tensors: check "
                            "input_edges_match.", new_port, graph.nodes[new].get("name", new))
            continue
        graph.add_edge(src, new, **{**attrs, "in": new_port})


def replace_output_edges(graph, mapping: dict):
    """{(old producer, out port): (new producer, out port)}: every consumer of the old
    output reads the new one."""
    for (old, old_port), (new, new_port) in mapping.items():
        for _, dst, key, attrs in list(graph.out_edges(old, keys=True, data=True)):
            if attrs.get("out", 0) == old_port:
                graph.remove_edge(old, dst, key)
                graph.add_edge(new, dst, **{**attrs, "out": new_port})


def remove_nodes(graph, node_ids):
    """Removes the nodes; a node outside them that still reads one of them is an
    error (its input would vanish). A model output they produced and nobody mapped
    goes with them (the runner warns about it)."""
    doomed = {n for n in node_ids if n in graph}
    for node_id in doomed:
        for _, dst, attrs in graph.out_edges(node_id, data=True):
            if dst not in doomed and graph.nodes[dst].get("op") != OUTPUT_OP:
                raise Error("Node '{}' is removed by the replacement, but '{}' (not replaced) still reads its output "
                            "{}: map that output in output_edges_match or keep the node.",
                            graph.nodes[node_id].get("name", node_id), graph.nodes[dst].get("name", dst),
                            attrs.get("out", 0))
    graph.remove_nodes_from(doomed)
