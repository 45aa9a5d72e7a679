"""The model graph: a networkx MultiDiGraph of op nodes and data nodes.

As in the reference guide, operations and tensors are separate nodes:
  op --(out=port)--> data --(in=port)--> op
A data node holds `shape` (np.int64 array) and, for constants, `value`. A data
node feeding an op through an edge with `bin='weights'|'biases'|...` is a blob of
that op: it is written into the .bin rather than becoming an IR edge.
"""
from __future__ import annotations

import itertools

import networkx as nx
import numpy as np

from core.errors import Error


class Graph(nx.MultiDiGraph):
    """MultiDiGraph with helpers used by front ends and passes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ids = itertools.count()

    # --- construction ---------------------------------------------------------
    def unique_id(self, prefix: str = "node") -> str:
        while True:
            candidate = "{}_{}".format(prefix, next(self._ids))
            if candidate not in self:
                return candidate

    def add_op(self, name: str, **attrs) -> "Node":
        node_id = name if name not in self else self.unique_id(name)
        attrs.setdefault("name", name)
        self.add_node(node_id, kind="op", **attrs)
        return Node(self, node_id)

    def add_data(self, name: str, shape=None, value=None, **attrs) -> "Node":
        node_id = self.unique_id(name + "/data")
        if value is not None:
            value = np.asarray(value)
            if shape is None:
                shape = np.array(value.shape, dtype=np.int64)
        if shape is not None:
            shape = np.array(shape, dtype=np.int64)
        self.add_node(node_id, kind="data", name=name, shape=shape, value=value, **attrs)
        return Node(self, node_id)

    def add_const(self, name: str, value) -> "Node":
        return self.add_data(name, value=np.asarray(value))

    def connect(self, src: "Node", dst: "Node", out: int | None = None, inp: int | None = None, **attrs):
        """op->data needs `out`; data->op needs `inp`."""
        if src.kind == "op":
            self.add_edge(src.id, dst.id, out=0 if out is None else out, **attrs)
        else:
            self.add_edge(src.id, dst.id, **{"in": 0 if inp is None else inp}, **attrs)

    # --- queries ----------------------------------------------------------------
    @property
    def node(self):
        """networkx 1.x's name for `nodes` (the reference guide's code reads graph.node[id])."""
        return self.nodes

    def node_obj(self, node_id) -> "Node":
        return Node(self, node_id)

    def op_nodes(self, **match) -> list["Node"]:
        result = []
        for node_id, attrs in self.nodes(data=True):
            if attrs.get("kind") != "op":
                continue
            if all(attrs.get(k) == v for k, v in match.items()):
                result.append(Node(self, node_id))
        return result

    def data_nodes(self) -> list["Node"]:
        return [Node(self, n) for n, a in self.nodes(data=True) if a.get("kind") == "data"]

    def op_by_name(self, name: str) -> "Node | None":
        if name in self and self.nodes[name].get("kind") == "op":
            return Node(self, name)
        for node_id, attrs in self.nodes(data=True):
            if attrs.get("kind") == "op" and attrs.get("name") == name:
                return Node(self, node_id)
        return None

    def topological_ops(self) -> list["Node"]:
        try:
            order = list(nx.topological_sort(self))
        except nx.NetworkXUnfeasible:
            cycle = nx.find_cycle(self)
            names = [self.nodes[u].get("name", u) for u, *_ in cycle if self.nodes[u].get("kind") == "op"]
            raise Error("Graph contains a cycle. Can not proceed: {}", " -> ".join(map(str, names + names[:1])),
                        faq=93)
        return [Node(self, n) for n in order if self.nodes[n].get("kind") == "op"]

    def remove_op_with_data(self, node: "Node"):
        """Removes an op node and its output data nodes."""
        outs = [n for n in self.successors(node.id)]
        self.remove_nodes_from(outs + [node.id])

    def bypass(self, node: "Node", in_port: int = 0, out_port: int = 0):
        """Removes a one-in/one-out op: consumers of its output read its input."""
        src = node.in_node(in_port)
        out = node.out_node(out_port)
        for _, consumer, key, attrs in list(self.out_edges(out.id, keys=True, data=True)):
            self.add_edge(src.id, consumer, **attrs)
        carry_output(src, out)
        self.remove_op_with_data(node)


class Node:
    """A light handle on a graph node with attribute access (MO style)."""

    __slots__ = ("graph", "id")

    def __init__(self, graph: Graph, node_id):
        object.__setattr__(self, "graph", graph)
        object.__setattr__(self, "id", node_id)

    # attribute access --------------------------------------------------------
    @property
    def attrs(self) -> dict:
        return self.graph.nodes[self.id]

    def __getattr__(self, item):
        try:
            return self.graph.nodes[self.id][item]
        except KeyError:
            raise AttributeError("node '{}' has no attribute '{}'".format(self.id, item)) from None

    def __setattr__(self, key, value):
        self.graph.nodes[self.id][key] = value

    def __getitem__(self, item):
        return self.graph.nodes[self.id][item]

    def __setitem__(self, key, value):
        self.graph.nodes[self.id][key] = value

    def __contains__(self, item):
        return item in self.graph.nodes[self.id]

    def __eq__(self, other):
        return isinstance(other, Node) and other.graph is self.graph and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return "<Node {} {}>".format(self.attrs.get("kind"), self.id)

    def has(self, attr) -> bool:
        return attr in self.attrs

    def has_valid(self, attr) -> bool:
        return self.attrs.get(attr) is not None

    def has_and_set(self, attr) -> bool:
        return bool(self.attrs.get(attr))

    def soft_get(self, attr, default=None):
        return self.attrs.get(attr, default if default is not None else "<UNKNOWN>" if attr == "name" else default)

    # edges ---------------------------------------------------------------------
    def in_edges_data(self) -> list[tuple[str, dict]]:
        """[(src id, edge attrs)] of incoming edges, sorted by input port."""
        edges = [(u, d) for u, _, d in self.graph.in_edges(self.id, data=True)]
        return sorted(edges, key=lambda e: e[1].get("in", e[1].get("out", 0)))

    def in_node(self, port: int = 0) -> "Node":
        for u, d in self.in_edges_data():
            if d.get("in") == port:
                return Node(self.graph, u)
        raise Error("Node '{}' has no input on port {}", self.soft_get("name"), port)

    def has_in(self, port: int) -> bool:
        return any(d.get("in") == port for _, d in self.in_edges_data())

    def in_nodes(self) -> dict[int, "Node"]:
        return {d["in"]: Node(self.graph, u) for u, d in self.in_edges_data() if "in" in d}

    def data_inputs(self) -> list["Node"]:
        """Inputs that are not blobs, in port order."""
        return [Node(self.graph, u) for u, d in self.in_edges_data() if "bin" not in d]

    def blob_inputs(self) -> list[tuple[str, "Node", int]]:
        return [(d["bin"], Node(self.graph, u), d["in"]) for u, d in self.in_edges_data() if "bin" in d]

    def out_edges_data(self) -> list[tuple[str, dict]]:
        edges = [(v, d) for _, v, d in self.graph.out_edges(self.id, data=True)]
        return sorted(edges, key=lambda e: e[1].get("out", e[1].get("in", 0)))

    def out_node(self, port: int = 0) -> "Node":
        for v, d in self.out_edges_data():
            if d.get("out", 0) == port:
                return Node(self.graph, v)
        raise Error("Node '{}' has no output on port {}", self.soft_get("name"), port)

    def has_out(self, port: int) -> bool:
        return any(d.get("out", 0) == port for _, d in self.out_edges_data())

    def out_nodes(self) -> dict[int, "Node"]:
        return {d.get("out", 0): Node(self.graph, v) for v, d in self.out_edges_data()}

    def consumers(self) -> list["Node"]:
        """For a data node: the op nodes reading it."""
        return [Node(self.graph, v) for _, v in self.graph.out_edges(self.id)]

    def producer(self) -> "Node | None":
        preds = list(self.graph.predecessors(self.id))
        return Node(self.graph, preds[0]) if preds else None


# --- front-phase helpers of the reference guide's replacement API -------------------
# During front replacements (core/front/replacement) the graph holds op nodes only,
# joined by edges with `out` (producer port) and `in` (consumer port) attributes.
def create_edge(src: Node, dst: Node, out_port: int = 0, in_port: int = 0, edge_attrs: dict | None = None):
    """Connects output `out_port` of `src` to input `in_port` of `dst` (front phase)."""
    attrs = dict(edge_attrs or {})
    attrs.update({"out": out_port, "in": in_port})
    src.graph.add_edge(src.id, dst.id, **attrs)


def replace_node(old_node: Node, new_node: Node, new_node_out_port: int | None = None):
    """Consumers of `old_node` read `new_node` instead (the same output port, or
    `new_node_out_port`), then `old_node` and its input edges are removed."""
    graph = old_node.graph
    if new_node.graph is not graph:
        raise Error("replace_node: the nodes '{}' and '{}' belong to different graphs.", old_node.soft_get("name"),
                    new_node.soft_get("name"))
    for _, dst, attrs in list(graph.out_edges(old_node.id, data=True)):
        attrs = dict(attrs)
        if new_node_out_port is not None:
            if attrs.get("out", 0) != 0:
                raise Error("replace_node: node '{}' has several output ports; new_node_out_port can only replace "
                            "a node with a single output.", old_node.soft_get("name"))
            attrs["out"] = new_node_out_port
        graph.add_edge(new_node.id, dst, **attrs)
    graph.remove_node(old_node.id)


def shape_tuple(data) -> tuple:
    """A data node's shape as a tuple of ints (() when it has none): what the middle passes compare."""
    shape = data.soft_get("shape")
    return tuple(int(v) for v in shape) if shape is not None else ()


def carry_output(src, out) -> None:
    """`src` takes `out`'s place among the model's outputs (if out is one). `is_output` holds that place:
    1, 2, ... in the model's order of outputs (IR v11 orders its Results so); the earlier place wins when
    src is an output already. The framework's names of out go with it whether or not it is an output yet
    (output_names: a named tf.identity before freezing's own Identity names the model's output too)."""
    mark = out.soft_get("is_output")
    if mark:
        src["is_output"] = min(int(mark), int(src.soft_get("is_output") or mark))
    theirs = output_names(out)
    if theirs:
        names = output_names(src)
        src["output_names"] = names + [n for n in theirs if n not in names]


def output_names(data) -> list[str]:
    """The framework's names of a tensor: its own ("node:port", a TensorFlow tensor's `tf_tensor`) and those of
    the tensors that passed it on (Identity nodes) as a model output: what OpenVINO's converters name it."""
    names = list(data.soft_get("output_names") or [])
    own = data.soft_get("tf_tensor")
    return ([own] if own and own not in names else []) + names
