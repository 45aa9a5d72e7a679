"""Builds the op/data graph from a GraphDef.

Each NodeDef becomes an op node carrying `pb` (the NodeDef) and `tf_op` (its op
type); each output port that something reads becomes a data node. Placeholders
become typed Input ops right away (`Parameter`, shape from the `shape`
attribute, -1 for an unknown batch). Control inputs (`^node`) only order
execution in TensorFlow: they are dropped. A node nothing reads (data or
control) is an output of the model, as the reference guide says; ops without
outputs (NoOp, Assert) never are, nor is a Placeholder or a Const nothing reads
(TensorFlow's lowered control flow leaves `unused_control_flow_input` placeholders,
OpenVINO's converter drops them too; a tf.cond on a frozen predicate leaves the
constant) unless the graph has no other output.
"""
from __future__ import annotations

import numpy as np

from core.errors import FrameworkError
from core.front.tf.tensors import attr
from core.graph.graph import Graph
from core.ops.parameter import Parameter

# ops that produce no tensor: they exist for their control edges
NO_OUTPUTS = {"NoOp", "Assert", "PrintV2", "ControlTrigger"}
# sinks that are no output unless the graph has no other: unread inputs, and constants (the predicate of a
# tf.cond that inlined one branch)
UNREAD_NOT_OUTPUTS = {"Placeholder", "PlaceholderV2", "PlaceholderWithDefault", "Const"}
PLACEHOLDERS = {"Placeholder"}


def parse_input(text: str) -> tuple[str, int, bool]:
    """'name' / 'name:port' / '^name' -> (name, port, is_control)."""
    if text.startswith("^"):
        return text[1:], 0, True
    name, sep, port = text.rpartition(":")
    if sep and port.isdigit():
        return name, int(port), False
    return text, 0, False


def _check_nodes(graph_def, path):
    names = set()
    for i, node in enumerate(graph_def.node):
        if not node.name:
            raise FrameworkError("Node #{} of the graph in '{}' has no name: the model file is damaged.", i, path,
                                 faq=43)
        if not node.op:
            raise FrameworkError("Node '{}' of the graph in '{}' has no op type: the model file is damaged.",
                                 node.name, path, faq=43)
        if node.name in names:
            raise FrameworkError("The graph in '{}' has two nodes named '{}'; node names must be unique.", path,
                                 node.name, faq=24)
        names.add(node.name)
    return names


def build_graph(graph_def, path: str = "<graph>", outputs_read: set = frozenset()) -> Graph:
    """outputs_read: nodes that are outputs of the model although something reads them (an unrolled loop's
    final state: core/front/tf/loops/)."""
    names = _check_nodes(graph_def, path)
    graph = Graph(name="model")
    graph.graph["framework"] = "tf"
    graph.graph["layout"] = "NHWC"  # until lowering: IR ops a replacer puts in find their channels last
    ops = {}
    for node in graph_def.node:
        if node.op in PLACEHOLDERS:
            op = graph.add_op(node.name, tf_op=node.op, pb=node)
            shape = attr(op, "shape", "shape", None)
            Parameter.update_node_stat(op, {"shape": None if shape is None else np.array(shape, dtype=np.int64)})
        else:
            op = graph.add_op(node.name, tf_op=node.op, pb=node)
        ops[node.name] = op

    outputs = {}  # (producer name, port) -> data node
    read = set()  # names of nodes something reads (data or control)

    def data_of(name, port):
        key = (name, port)
        if key not in outputs:
            out = graph.add_data(name if port == 0 else "{}:{}".format(name, port))
            out["tf_tensor"] = "{}:{}".format(name, port)  # (its name for OpenVINO's users: output_names)
            graph.connect(ops[name], out, out=port)
            outputs[key] = out
        return outputs[key]

    for node in graph_def.node:
        port_in = 0
        for text in node.input:
            src, port, control = parse_input(text)
            if src not in names:
                raise FrameworkError(
                    "Node '{}' reads '{}', but the graph has no node '{}'. While creating an edge the node name was "
                    "undefined in the graph: check that the model file is complete.", node.name, text, src, faq=24)
            read.add(src)
            if control:
                continue
            if graph_def_op(ops[src]) in NO_OUTPUTS:
                raise FrameworkError("Node '{}' reads an output of '{}' ({}), which has none.", node.name, src,
                                     graph_def_op(ops[src]), faq=24)
            graph.connect(data_of(src, port), ops[node.name], inp=port_in)
            port_in += 1

    sinks = [node for node in graph_def.node if (node.name not in read or node.name in outputs_read)
             and node.op not in NO_OUTPUTS]
    computed = [node for node in sinks if node.op not in UNREAD_NOT_OUTPUTS]
    for place, node in enumerate(computed or sinks, start=1):  # (the model's order: carry_output)
        data_of(node.name, 0)["is_output"] = place
    return graph


def graph_def_op(node) -> str:
    return node.soft_get("tf_op")

