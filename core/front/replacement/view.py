"""The front-phase form of the graph that replacers see, and back.

The reference guide's replacers run "before shape inference and creation of data
nodes": every node is an operation, edges join a producer's output port (`out`)
to a consumer's input port (`in`), and constants are `Const` nodes. The rest of
mo-core keeps tensors as data nodes (core/graph/graph.py), so the replacement
step turns the graph into that form (`to_front_view`), runs the replacers, and
turns it back (`from_front_view`):

- a data node with a producer becomes edges producer -> consumer; its attributes
  (name, shape, ...) are kept aside and given back to the tensor of the same
  producer port afterwards;
- a data node without a producer (a blob, a constant) becomes a `Const` op node
  in place (`value`, `shape`); any `Const` node with a value and no input becomes
  a data node again, so a replacer may create constants with `Const`-op nodes;
- a model output becomes an `OpOutput` node reading the tensor, so rewiring a
  replaced node's consumers moves the output with them (the reference's OpOutput);
- nodes that have no `op` yet (framework layers no extractor knows, TensorFlow
  nodes before lowering) show their framework type as `op` while replacers run.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

from core.errors import Error

OUTPUT_OP = "OpOutput"
_TENSORS = "front_tensors"       # graph.graph key: (producer id, port) -> (data id, data attrs, edge attrs)
_FRAMEWORK_OP = "_front_framework_op"
_CONST = "_front_const"


def framework_type(attrs: dict):
    return attrs.get("caffe_type") or attrs.get("tf_op")


def to_front_view(graph):
    """Turns the op/data graph into the op-only form, in place."""
    tensors = {}
    pred, succ = graph.pred, graph.succ
    for data_id, attrs in list(graph.nodes(data=True)):
        if attrs.get("kind") != "data":
            continue
        producers = [(u, e) for u, keyed in pred[data_id].items() for e in keyed.values()]
        if not producers:
            _data_to_const(graph, data_id)
            continue
        src, producer_edge = producers[0]
        port = producer_edge.get("out", 0)
        keep = {k: v for k, v in attrs.items() if k not in ("kind", "is_output")}
        tensors[(src, port)] = (data_id, keep, {k: v for k, v in producer_edge.items() if k != "out"})
        for dst, keyed in list(succ[data_id].items()):
            for edge in list(keyed.values()):
                graph.add_edge(src, dst, **{**edge, "out": port})
        if attrs.get("is_output"):
            sink = graph.unique_id((attrs.get("name") or str(data_id)) + "/sink_port_{}".format(port))
            graph.add_node(sink, kind="op", op=OUTPUT_OP, type=OUTPUT_OP, name=sink, place=attrs["is_output"])
            graph.add_edge(src, sink, **{"out": port, "in": 0})
        graph.remove_node(data_id)
    for node_id, attrs in graph.nodes(data=True):
        if attrs.get("kind") == "op" and attrs.get("op") is None and framework_type(attrs):
            attrs["op"] = framework_type(attrs)
            attrs[_FRAMEWORK_OP] = True
    graph.graph[_TENSORS] = tensors
    graph.graph["front_view"] = True


def _data_to_const(graph, data_id):
    attrs = graph.nodes[data_id]
    attrs.pop("is_output", None)
    attrs.update(kind="op", op="Const", type="Const")
    attrs[_CONST] = True
    for keyed in graph.succ[data_id].values():
        for edge in keyed.values():
            edge.setdefault("out", 0)


def remove_dead_nodes(graph) -> list:
    """Dead code elimination in the front form: only nodes some model output depends
    on stay. Returns the ids removed."""
    sinks = [n for n, a in graph.nodes(data=True) if a.get("op") == OUTPUT_OP]
    keep = set(sinks)
    for sink in sinks:
        keep |= nx.ancestors(graph, sink)
    dead = [n for n in graph.nodes if n not in keep]
    graph.remove_nodes_from(dead)
    return dead


def _is_const(graph, node_id, attrs) -> bool:
    if attrs.get(_CONST):
        return True
    return (attrs.get("op") == "Const" and attrs.get("value") is not None and attrs.get("tf_class") is None
            and not graph.pred[node_id])


def from_front_view(graph):
    """Turns the op-only form back into the op/data graph, in place."""
    tensors = graph.graph.pop(_TENSORS, {})
    graph.graph["front_view"] = False
    for node_id, attrs in list(graph.nodes(data=True)):
        if attrs.get("kind") != "op" or attrs.get("op") == OUTPUT_OP:
            continue
        if attrs.pop(_FRAMEWORK_OP, False) and attrs.get("op_class") is None:
            del attrs["op"]  # still a framework node nobody turned into an op
        if _is_const(graph, node_id, attrs):
            _const_to_data(graph, node_id, attrs)
            continue
        by_port: dict[int, list] = {}
        for dst, keyed in graph.succ[node_id].items():
            for key, edge in keyed.items():
                by_port.setdefault(edge.get("out", 0), []).append((dst, key, edge))
        for port, edges in sorted(by_port.items()):
            data_id, data_attrs, producer_edge = tensors.get((node_id, port), (None, {}, {}))
            if data_id is None or data_id in graph:
                data_attrs = dict(data_attrs)
                data_attrs.setdefault("name", attrs.get("name", node_id) if port == 0
                                      else "{}:{}".format(attrs.get("name", node_id), port))
                data_id = graph.unique_id(str(data_attrs["name"]) + "/data")
            graph.add_node(data_id, **{**data_attrs, "kind": "data"})
            graph.add_edge(node_id, data_id, **{**producer_edge, "out": port})
            for dst, key, edge in edges:
                graph.remove_edge(node_id, dst, key)
                if graph.nodes[dst].get("op") == OUTPUT_OP:
                    graph.nodes[data_id]["is_output"] = graph.nodes[dst].get("place", True)  # (its place kept)
                    continue
                graph.add_edge(data_id, dst, **{k: v for k, v in edge.items() if k != "out"})
    for node_id, attrs in list(graph.nodes(data=True)):
        if attrs.get("op") == OUTPUT_OP and attrs.get("kind") == "op":
            for src, _ in list(graph.in_edges(node_id)):  # a constant read as a model output
                if graph.nodes[src].get("kind") == "data":
                    graph.nodes[src]["is_output"] = attrs.get("place", True)
            graph.remove_node(node_id)


def _const_to_data(graph, node_id, attrs):
    if attrs.get("value") is None:
        raise Error("The constant node '{}' has no value: a Const node made by a replacer needs `value`.",
                    attrs.get("name", node_id))
    for key in ("op", "type", "infer", "backend_attrs", "op_class", _CONST):
        attrs.pop(key, None)
    attrs["kind"] = "data"
    attrs["value"] = np.asarray(attrs["value"])
    attrs["shape"] = np.array(attrs["value"].shape, dtype=np.int64)
    for _, _, edge in graph.out_edges(node_id, data=True):
        edge.pop("out", None)
